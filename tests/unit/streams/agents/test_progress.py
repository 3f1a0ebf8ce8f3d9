"""The agents' docs.progress records say whose document moved."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import DocumentResult, Operation, Options, PageState, Progress, decode
from schemas.pages import BlobRef
from schemas.results import PageResult
from streams.agents import progress
from streams.kafka.envelope import Origin
from streams.topics import GPU_ORIENT, PAGES_DONE, Topology

TOPO = Topology("t.")
WHEN = datetime(2026, 1, 1, tzinfo=UTC)
ORIGIN = Origin(TOPO.name(PAGES_DONE), 0, 1, None, b"d", b"")


def _page(tenant: str | None) -> PageState:
    image = BlobRef(uri="file:///b/x.png", sha256="0" * 64, media_type="image/png", size_bytes=1)
    return PageState(doc_id="d", page_no=1, page_count=1, operation=Operation.classify,
                     options=Options(), image=image, tenant=tenant,
                     submitted_at=WHEN)  # fmt: skip


def _result(tenant: str | None) -> DocumentResult:
    return DocumentResult(doc_id="d", operation=Operation.classify, status="completed",
                          page_count=1, pages=[PageResult(page_no=1)], tenant=tenant,
                          submitted_at=WHEN, completed_at=WHEN)  # fmt: skip


def _written(tenant: str | None) -> list[Progress]:
    records = [
        *progress.page_moved(TOPO, _page(tenant), TOPO.name(GPU_ORIENT), ORIGIN),
        progress.page_done(TOPO, _page(tenant), 1, ORIGIN),
        progress.document_ended(TOPO, _result(tenant), ORIGIN),
    ]
    return [decode(Progress, r.value) for r in records]


def test_every_progress_record_carries_the_tenant_of_its_page_or_result() -> None:
    written = _written("team-7")
    assert [(p.stage, p.tenant) for p in written] == [
        ("orient", "team-7"), ("done", "team-7"), ("ended", "team-7")]  # fmt: skip
    assert [p.tenant for p in _written(None)] == [None, None, None]
