"""A tenant's uploads are addressed in the tenant's space (issue 34, finding 7): the
address names the tenant as well as the content, so naming it says nothing about what
another tenant stored, and a tenant's document reads no other tenant's upload."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from streams.blobs import BlobAccessError, BlobStore

DATA = b"%PDF-1.7 one tenant's document"
DIGEST = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def store(tmp_path: Path) -> BlobStore:
    return BlobStore(str(tmp_path / "blobs"))


def test_each_tenant_stores_and_names_in_its_own_space(store: BlobStore) -> None:
    acme, other = store.scoped("acme"), store.scoped("other")
    blob = acme.put(DATA)
    assert (
        blob.uri
        == acme.uri_for(DIGEST)
        == f"{store.root}/tenants/acme/sha256/" + "/".join((DIGEST[:2], DIGEST[2:4], DIGEST))
    )
    assert store.exists(acme.uri_for(DIGEST))
    # The same content is a different address for another tenant, and for the store.
    assert not store.exists(other.uri_for(DIGEST))
    assert not store.exists(store.uri_for(DIGEST))
    assert other.put(DATA).uri == other.uri_for(DIGEST) != blob.uri


def test_an_upload_written_in_chunks_is_published_in_its_tenants_space(store: BlobStore) -> None:
    writer = store.scoped("acme").writer()
    writer.write(DATA[:10])
    writer.write(DATA[10:])
    assert writer.commit().uri == store.scoped("acme").uri_for(DIGEST)
    assert store.get(store.scoped("acme").uri_for(DIGEST), expected_sha256=DIGEST) == DATA
    assert store.collect_partials(0) == 0  # its partial was the root's, and is gone


def test_a_tenants_document_reads_no_other_tenants_upload(store: BlobStore) -> None:
    uri = store.scoped("acme").put(DATA).uri
    assert store.get(uri, tenant="acme") == DATA
    assert store.get(uri) == DATA  # no tenant: the operator's own record
    with pytest.raises(BlobAccessError, match="another tenant's upload"):
        store.get(uri, tenant="other")
    # The store's own blobs (page images, `pagestream submit`'s uploads) are anyone's.
    assert store.get(store.put(DATA).uri, tenant="other") == DATA


@pytest.mark.parametrize("tenant", ["", "..", "a/b", "Acme", "x" * 64])
def test_a_space_is_only_ever_a_tenant_name(store: BlobStore, tenant: str) -> None:
    with pytest.raises(ValueError, match="not a tenant name"):
        store.scoped(tenant)
