"""The agents' side of docs.progress: one small record each time a page moves.

ingest and route write the work topic a page now waits in, deliver that a page is done
and that its document ended. The keys and partitions are streams/client/progress.py's,
which `pagestream status` reads back (streams/client/status.py).
"""

from __future__ import annotations

from schemas import DocumentResult, PageState, Progress, ProgressStage
from schemas.common import Stage
from schemas.progress import progress_json
from streams.client.progress import partition_of, record_key
from streams.kafka.envelope import Origin, Outgoing, hop_record
from streams.topics import PAGES_DONE, PROGRESS, WORK_BY_STAGE, Topology

_STAGE_OF_TOPIC = {spec.base: Stage(stage).value for stage, spec in WORK_BY_STAGE.items()}


def stage_of(topology: Topology, topic: str) -> ProgressStage | None:
    """The progress stage of a page sent to `topic` (None: a topic pages do not wait in)."""
    base = topic.removeprefix(topology.prefix)
    if base == PAGES_DONE.base:
        return "aggregate"
    return _STAGE_OF_TOPIC.get(base)  # type: ignore[return-value]


def _record(topology: Topology, origin: Origin, doc_id: str, page_no: int | None,
            stage: ProgressStage, value: bytes) -> Outgoing:  # fmt: skip
    """The record of `value` (progress_json's) on docs.progress."""
    key = record_key(doc_id, page_no)
    return hop_record(topology.name(PROGRESS), key, Progress, value, origin,
                      f"progress:{key}:{stage}", partition=partition_of(doc_id))  # fmt: skip


def page_moved(topology: Topology, page: PageState, topic: str, origin: Origin) -> list[Outgoing]:
    """The progress record of a page sent to `topic`, if it is a topic pages wait in."""
    stage = stage_of(topology, topic)
    if stage is None:
        return []
    value = progress_json(page.doc_id, page_no=page.page_no, pages_total=page.page_count,
                          stage=stage, tenant=page.tenant)  # fmt: skip
    return [_record(topology, origin, page.doc_id, page.page_no, stage, value)]


def page_done(topology: Topology, page: PageState, pages_done: int, origin: Origin) -> Outgoing:
    value = progress_json(page.doc_id, page_no=page.page_no, pages_total=page.page_count,
                          stage="done", pages_done=pages_done, tenant=page.tenant)  # fmt: skip
    return _record(topology, origin, page.doc_id, page.page_no, "done", value)


def document_ended(topology: Topology, result: DocumentResult, origin: Origin) -> Outgoing:
    done = sum(1 for p in result.pages if p.error is None)
    value = progress_json(result.doc_id, pages_total=result.page_count, stage="ended",
                          pages_done=done, status=result.status, tenant=result.tenant)  # fmt: skip
    return _record(topology, origin, result.doc_id, None, "ended", value)
