"""Progress of a document through the pipeline, one record per move (docs.progress)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, Field

from schemas.common import DocId, Record, Tenant

# Where a page is: waiting in a GPU stage's work topic, aggregating (its stages are done
# and deliver has not taken it yet), done (deliver has it). The document's own record says
# "submitted" (the HTTP gateway has put it on docs.raw; ingest has not split it yet), then
# "ended".
ProgressStage = Literal[
    "submitted", "orient", "classify", "extract", "ocr", "aggregate", "done", "ended"
]


def _now() -> datetime:
    return datetime.now(UTC)


class Progress(Record):
    """A page (or, with no page_no, the whole document) reached `stage` at `at`.

    Keyed `doc_id/page_no` (`doc_id` for the document) on the compacted docs.progress,
    so the latest record per key is where that page is now.
    """

    doc_id: DocId
    page_no: int | None = Field(default=None, ge=1)
    pages_total: int = Field(ge=0)
    stage: ProgressStage
    pages_done: int | None = Field(default=None, ge=0)  # known to deliver
    status: Literal["completed", "partial", "failed"] | None = None  # when ended
    tenant: Tenant | None = None  # the document's submitter
    at: AwareDatetime = Field(default_factory=_now)
