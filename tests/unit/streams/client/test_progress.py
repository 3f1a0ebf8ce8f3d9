"""docs.progress's layout: what the agents write is what `pagestream status` reads."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import Operation, Options, PageState
from schemas.pages import BlobRef
from streams.agents import progress as writer
from streams.client.progress import is_key_of, partition_of
from streams.kafka.envelope import Origin
from streams.topics import GPU_ORIENT, PROGRESS, RESULTS, Topology

TOPO = Topology("t.")


def _page(doc_id: str, page_no: int) -> PageState:
    image = BlobRef(uri="file:///b/x.png", sha256="0" * 64, media_type="image/png", size_bytes=1)
    return PageState(doc_id=doc_id, page_no=page_no, page_count=2, operation=Operation.classify,
                     options=Options(), image=image,
                     submitted_at=datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip


def test_every_record_of_a_document_is_on_its_partition_under_its_keys() -> None:
    origin = Origin(TOPO.name(GPU_ORIENT), 0, 1, None, b"doc-1", b"")
    (moved,) = writer.page_moved(TOPO, _page("doc-1", 2), TOPO.name(GPU_ORIENT), origin)
    done = writer.page_done(TOPO, _page("doc-1", 1), 1, origin)
    for out in (moved, done):
        assert out.topic == TOPO.name(PROGRESS) and out.partition == partition_of("doc-1")
        assert is_key_of(out.key or b"", "doc-1")
    assert (moved.key, done.key) == (b"doc-1/2", b"doc-1/1")
    assert not is_key_of(b"doc-10/1", "doc-1") and is_key_of(b"doc-1", "doc-1")
    # A topic pages do not wait in writes nothing.
    assert writer.page_moved(TOPO, _page("doc-1", 2), TOPO.name(RESULTS), origin) == []
