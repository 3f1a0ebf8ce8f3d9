"""Content addresses are the tenant's own (issue 34, finding 7): a JSON submission may
name only a blob its own tenant uploaded, and no answer tells another tenant's file from
no file. Before, the store was one space for every tenant: naming the address of a file
that anyone had uploaded answered 202 (422 when nothing was there), and the document was
then processed from the other tenant's upload. A real `pagestream api` and the broker."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from streams.blobs import BlobStore
from streams.settings import Settings
from streams.topics import Topology
from synth.pdf import report_pages, text_pdf
from tests.support.gateway import Api, multipart, new_key, raw_doc_ids

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _name(client: httpx.Client, uri: str, sha256: str) -> httpx.Response:
    return client.post("/v1/documents", json={"payload": {"uri": uri, "sha256": sha256}})


def test_a_tenant_names_only_its_own_uploads_and_cannot_tell_anothers_from_none(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    store = BlobStore.from_settings(cli_env.blobs)
    secret = text_pdf(report_pages(21, 1))
    digest = hashlib.sha256(secret).hexdigest()
    missing = hashlib.sha256(b"never uploaded by anyone").hexdigest()
    acme, other = new_key(api_dir, "acme"), new_key(api_dir, "other")
    with api.client(acme) as client:
        body, content_type = multipart({"operation": "ocr"}, secret)
        uploaded = client.post("/v1/documents", content=body,
                               headers={"Content-Type": content_type})  # fmt: skip
        assert uploaded.status_code == 202, uploaded.text
        # acme's upload is addressed in acme's space, and acme may name it there.
        assert store.exists(store.scoped("acme").uri_for(digest))
        again = _name(client, store.scoped("acme").uri_for(digest), digest)
        assert again.status_code == 202, again.text
    with api.client(other) as client:
        probes = {
            # acme's file, by the address acme's own submission names it by.
            "acme's address": _name(client, store.scoped("acme").uri_for(digest), digest),
            # acme's file, by the store-wide address (what every upload had before).
            "store-wide address": _name(client, store.uri_for(digest), digest),
            # acme's content, in other's own space, where other never stored it.
            "own space, acme's content": _name(
                client, store.scoped("other").uri_for(digest), digest
            ),
            # Nothing anywhere: the answers above must read exactly like these.
            "missing, acme's space": _name(client, store.scoped("acme").uri_for(missing), missing),
            "missing, own space": _name(client, store.scoped("other").uri_for(missing), missing),
        }
    answers = {name: (r.status_code, r.text) for name, r in probes.items()}
    assert len(set(answers.values())) == 1, answers
    status, _ = answers["missing, own space"]
    assert status == 422
    # Nothing of other's went onto docs.raw: acme's upload and acme's naming of it only.
    assert raw_doc_ids(cli_env, topology) == sorted(
        [uploaded.json()["doc_id"], again.json()["doc_id"]]
    )
