"""Progress of a document through the pipeline, one record per move (docs.progress)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Literal, get_args

from pydantic import AwareDatetime, Field

from schemas.codec import encode
from schemas.common import (
    DOC_ID_PATTERN,
    TENANT_PATTERN,
    DocId,
    DocumentStatus,
    Record,
    Tenant,
)

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
    status: DocumentStatus | None = None  # when ended
    tenant: Tenant | None = None  # the document's submitter
    at: AwareDatetime = Field(default_factory=_now)


_DOC_ID = re.compile(DOC_ID_PATTERN)
_TENANT = re.compile(TENANT_PATTERN)
_STAGES = frozenset(get_args(ProgressStage))
_STATUSES = frozenset(get_args(DocumentStatus))


def progress_json(
    doc_id: str,
    *,
    pages_total: int,
    stage: ProgressStage,
    page_no: int | None = None,
    pages_done: int | None = None,
    status: DocumentStatus | None = None,
    tenant: str | None = None,
) -> bytes:
    """`encode(Progress(...))` of a record stamped now, the same bytes at a fifth of the
    cost: the agents write one for every page they move (a quarter of a route record's
    CPU went to building and dumping the model). Written directly only when every
    field is one the model accepts as it is (a DocId and a Tenant hold no character
    JSON escapes); anything else goes through the model, which says what is wrong."""
    if (
        type(doc_id) is str  # not a subclass, whose format() may write anything
        and _DOC_ID.fullmatch(doc_id)
        and (tenant is None or (type(tenant) is str and _TENANT.fullmatch(tenant)))
        and type(stage) is str
        and stage in _STAGES
        and (status is None or (type(status) is str and status in _STATUSES))
        and _count(pages_total, 0)
        and (page_no is None or _count(page_no, 1))
        and (pages_done is None or _count(pages_done, 0))
    ):
        at = _stamp()
        return (
            f'{{"schema_version":1,"doc_id":"{doc_id}","page_no":{_or_null(page_no)},'
            f'"pages_total":{pages_total},"stage":"{stage}","pages_done":{_or_null(pages_done)},'
            f'"status":{_quoted(status)},"tenant":{_quoted(tenant)},"at":"{at}"}}'
        ).encode()
    return encode(Progress(doc_id=doc_id, page_no=page_no, pages_total=pages_total, stage=stage,
                           pages_done=pages_done, status=status, tenant=tenant))  # fmt: skip


_second: list[tuple[int, str]] = [(-1, "")]  # the last second written, as ISO text


def _stamp() -> str:
    """Now, as the model writes an aware UTC datetime (no fraction on a whole second), its
    date and time written once a second: datetime.now().isoformat() was a third of a
    progress record's cost."""
    second, nanos = divmod(time.time_ns(), 1_000_000_000)
    last, text = _second[0]
    if second != last:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second[0] = (second, text)
    micros = nanos // 1000
    return f"{text}.{micros:06d}Z" if micros else f"{text}Z"


# Below str()'s limit on digits: the model writes (or refuses) larger ones itself. A
# constant: written in the comparison, 10**4000 was computed on every call (Python folds
# only small powers), 43 us each, a third of deliver's step.
_COUNT_LIMIT = 10**4000


def _count(value: object, least: int) -> bool:
    return type(value) is int and least <= value < _COUNT_LIMIT


def _or_null(value: int | None) -> str:
    return "null" if value is None else str(value)


def _quoted(value: str | None) -> str:
    return "null" if value is None else f'"{value}"'
