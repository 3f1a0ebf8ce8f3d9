"""One consumed page task: its record, its slot in the offset order, its image.

Also how a finished task becomes output records: the updated PageState to the
stage's facts topic, or the original record to docs.dlq with the error headers.
"""

from __future__ import annotations

import secrets
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field

from gpu_node.images import RGBArray
from gpu_node.ordering import Output, Slot
from schemas import PageState, Stage, encode, headers
from streams.dead_letters import Origin, dead_letter_headers
from streams.kafka import new_traceparent

# Output event ids derive from the input's, so a redone task (after a crash or an
# aborted transaction) carries the same id and downstream dedupe recognises it.
_EVENT_NS = uuid.UUID("6f1d3c52-8f0e-4d43-9a57-0d9c1f0b7a10")


@dataclass(eq=False)
class Task:
    stage: Stage
    slot: Slot
    origin: Origin
    page: PageState
    image: Future[RGBArray] | None = None  # fetch + decode, started when consumed
    attempts: int = 1
    not_before: float = 0.0  # monotonic time before which an engine retry must wait
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def dropped(self) -> bool:
        return self.slot.dropped


def header(origin: Origin, name: str) -> str | None:
    for key, value in origin.headers:
        if key == name:
            return value.decode("utf-8", "replace")
    return None


def output_event_id(origin: Origin, stage: Stage) -> str:
    source = header(origin, headers.EVENT_ID)
    if source is None:
        source = f"{origin.topic}/{origin.partition}/{origin.offset}"
    return str(uuid.uuid5(_EVENT_NS, f"{source}:{stage.value}"))


def child_traceparent(origin: Origin) -> str:
    """Same trace as the input, new span: the GPU stage is one hop of the trace."""
    parent = header(origin, headers.TRACEPARENT)
    parts = parent.split("-") if parent else []
    if len(parts) == 4 and len(parts[1]) == 32:
        return f"{parts[0]}-{parts[1]}-{secrets.token_hex(8)}-{parts[3]}"
    return new_traceparent()


def result_output(task: Task, page: PageState, topic: str) -> Output:
    return Output(
        topic=topic,
        key=page.doc_id.encode(),
        value=encode(page),
        headers=[
            (headers.EVENT_ID, output_event_id(task.origin, task.stage).encode()),
            (headers.SCHEMA, headers.schema_header(PageState).encode()),
            (headers.TRACEPARENT, child_traceparent(task.origin).encode()),
        ],
    )


def dead_letter_output(
    origin: Origin, *, stage: str, group: str, exc: BaseException, dlq_topic: str, attempts: int
) -> Output:
    return Output(
        topic=dlq_topic,
        key=origin.key,
        value=origin.value,
        headers=dead_letter_headers(origin, stage=stage, group=group, exc=exc, attempts=attempts),
    )
