"""What the node writes for a finished task: its result on the stage's facts topic, or a
dead letter (and the page back on its facts topic with the error).

Every outcome resolves the task's slot in the offset order (ordering.py) with the
records to write; the loop commits them with the consumed offsets in one transaction
(transactions.py). A result too large for a Kafka record is the record's fault: its
OCR first travels as a claim check in the blob store, and if it still does not fit
the page is dead-lettered. A task the world failed (the blob store was unavailable)
is not dead-lettered: its partition is retried later (`retry_later`, partitions.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from opentelemetry.util.types import AttributeValue

from gpu_node.models.classifier import PageReading
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import OffsetOrder, RecordKey, Slot
from gpu_node.node.stages import StageOutcome
from gpu_node.node.tasks import Task
from gpu_node.node.transactions import Refusals
from schemas import PageState, Stage, headers
from streams.blobs import BlobStore
from streams.claim_check import ClaimCheck
from streams.faults import OutputTooLargeError, WorldError, is_worlds_fault
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing, error_message, next_record
from streams.routing import stages_for
from streams.settings import NodeSettings
from streams.telemetry import tracing

log = logging.getLogger(__name__)

# Which PageState field each stage fills.
_RESULT_FIELD = {
    Stage.orient: "orientation",
    Stage.classify: "classification",
    Stage.ocr: "ocr",
    Stage.extract: "extraction",
}

__all__ = ["Outcomes"]


class Outcomes:
    """Turns task results and failures into the output records of their slots."""

    def __init__(
        self,
        settings: NodeSettings,
        order: OffsetOrder,
        blobs: BlobStore,
        metrics: NodeMetrics,
        *,
        facts_topic: dict[Stage, str],
        dead_letters: DeadLetters,
        retry_later: Callable[[Slot, BaseException], None],
    ) -> None:
        self.settings = settings
        self.order = order
        # The one record limit (PAGESTREAM_KAFKA__MAX_RECORD_BYTES), measured by the one
        # gate (streams/kafka/sizes.py): with the room route needs to carry a fact on.
        self.max_record_bytes = dead_letters.max_record_bytes
        self.claim_check = ClaimCheck(blobs, self.max_record_bytes)
        self.metrics = metrics
        self.facts_topic = facts_topic
        self.stage_of_output = {t: s for s, t in facts_topic.items()}
        self.dead_letters = dead_letters
        self._retry_later = retry_later
        # Inputs whose outputs the broker refused as too large, and how often by which
        # topic (transactions.py): redone, they are dead-lettered instead. Refused on
        # its facts topic, the page's error goes back slim, then not at all; refused on
        # docs.dlq, the letter goes without its value, then with its error headers
        # alone. Dropped once the input's outcome commits.
        self._refusals: dict[RecordKey, dict[str, int]] = {}

    def refused_by_broker(self, refused: Refusals) -> None:
        for key, topics in refused.items():
            counts = self._refusals.setdefault(key, {})
            for topic in topics:
                counts[topic] = counts.get(topic, 0) + 1

    def committed(self, sources: set[RecordKey]) -> None:
        for key in sources:
            self._refusals.pop(key, None)

    def _refused(self, slot: Slot) -> tuple[int, int]:
        """How often the broker refused this input's fact, and its dead letter."""
        counts = self._refusals.get(_key(slot), {})
        dlq = counts.get(self.dead_letters.dlq_topic, 0)
        return sum(counts.values()) - dlq, dlq

    def apply(self, outcomes: list[StageOutcome]) -> None:
        for task, outcome in outcomes:
            if isinstance(outcome, BaseException):
                self.dead_letter(task, outcome)
            else:
                self.resolve_or_dead_letter(task, outcome)

    def resolve_or_dead_letter(self, task: Task, result: Any) -> None:
        try:
            self._resolve(task, result)
        except Exception as exc:
            self.dead_letter(task, exc)

    def _resolve(self, task: Task, result: Any) -> None:
        if task.dropped:
            return
        if _key(task.slot) in self._refusals:
            raise OutputTooLargeError(
                f"the broker refused the {task.stage} result as too large: a topic's "
                "max.message.bytes is below PAGESTREAM_KAFKA__MAX_RECORD_BYTES "
                "(`pagestream topics apply` aligns them)"
            )
        update: dict[str, Any] = {"last_stage": task.stage, "error": None}
        if isinstance(result, PageReading):  # orient by the page model
            update["orientation"] = result.orientation
            if (
                result.classification is not None
                and result.orientation is not None
                and result.orientation.rotation_degrees == 0
                and Stage.classify in stages_for(task.page.operation, auto_rotate=True)
            ):
                # The page was upright: the pass that oriented it saw exactly what the
                # classify stage would see, so its type stands and the page skips
                # gpu.classify (next_step reads the classification as that stage done).
                update["classification"] = result.classification
        else:
            update[_RESULT_FIELD[task.stage]] = result
        page = task.page.model_copy(update=update)
        out = self._fact(task, page)
        if not out.fits(self.max_record_bytes) and page.ocr is not None:
            # A dense page's OCR can outgrow a record on its own: it travels as a claim
            # check, like the page's image (the blob store being down is retried).
            page = self.claim_check.ocr_by_reference(page)
            out = self._fact(task, page)
        if not out.fits(self.max_record_bytes):
            # Raised before the slot is resolved: the caller dead-letters the task.
            raise OutputTooLargeError(
                f"{task.stage} result is {out.size_bytes} bytes, over the record limit of "
                f"{self.max_record_bytes} (PAGESTREAM_KAFKA__MAX_RECORD_BYTES)"
            )
        self.order.resolve(task.slot, [out])

    def _fact(self, task: Task, page: PageState) -> Outgoing:
        topic = self.facts_topic[task.stage]
        # The stage's span: from the record's consumption to its result, child of the
        # hop that wrote it; the fact carries the span on (see streams/telemetry/tracing.py).
        attributes: dict[str, AttributeValue] = {
            "pagestream.doc_id": page.doc_id,
            "pagestream.page_no": page.page_no,
            "pagestream.batch_size": task.batch_size,
        }
        with tracing.hop(f"gpu.{task.stage.value}", task.origin.header(headers.TRACEPARENT),
                         start_ns=task.consumed_ns, attributes=attributes):  # fmt: skip
            out = next_record(topic, page.doc_id, page, task.origin, task.stage.value)
        if task.model_s:
            out.headers.append((headers.MODEL_MS, f"{task.model_s * 1000:.1f}".encode()))
        return out

    def dead_letter(self, task: Task, exc: BaseException) -> None:
        """The record's fault: a dead letter, and the page back on its facts topic with
        the error, so deliver can end its document (partial or failed) instead of
        waiting for it forever."""
        if task.dropped:
            return
        if is_worlds_fault(exc):  # the blob store or the engine unavailable
            self._retry_later(task.slot, exc)
            return
        letter = self._dead_letter_record(task.slot, task.origin, task.stage, exc, task.attempts)
        if letter is not None:
            facts, _ = self._refused(task.slot)
            page_error = [] if facts > 1 else self._page_error(task, exc, slim=facts > 0)
            self.order.resolve(task.slot, [letter, *page_error])

    def _page_error(self, task: Task, exc: BaseException, *, slim: bool) -> list[Outgoing]:
        error = f"{task.stage.value} failed: {type(exc).__name__}: {error_message(exc)}"
        failed = task.page.model_copy(update={"error": error})
        out = self._fact(task, failed)
        if slim or not out.fits(self.max_record_bytes):
            # Too large with what it carries (the reason it failed, maybe): deliver
            # needs the page's identity and the error, not its results or attributes.
            slimmed = failed.model_copy(update={"attributes": {}, "ocr": None, "extraction": None})
            out = self._fact(task, slimmed)
        return [out] if out.fits(self.max_record_bytes) else []

    def dead_letter_origin(
        self, slot: Slot, origin: Origin, stage: Stage, exc: BaseException, attempts: int
    ) -> None:
        """A record that is not even a page: only the dead letter."""
        letter = self._dead_letter_record(slot, origin, stage, exc, attempts)
        if letter is not None:
            self.order.resolve(slot, [letter])

    def _dead_letter_record(
        self, slot: Slot, origin: Origin, stage: Stage, exc: BaseException, attempts: int
    ) -> Outgoing | None:
        """The dead letter, or None when its value could not be kept aside (the blob
        store unavailable): then the slot's partition is retried later, since a letter
        without its value could never be replayed."""
        _, dlq = self._refused(slot)
        try:
            letter = self.dead_letters.letter(
                stage.value, origin, exc, attempts=attempts, without_value=dlq > 0
            )
        except WorldError as world:
            self._retry_later(slot, world)
            return None
        return self.dead_letters.bare(letter) if dlq > 1 else letter

    def count(self, outputs: list[Outgoing]) -> None:
        """The metrics of records about to be committed: results per stage, dead letters."""
        self.dead_letters.sent(outputs)
        for out in outputs:
            if self.dead_letters.is_dead_letter(out):
                stage = out.header(headers.ERROR_STAGE) or "unknown"
                self.metrics.records_failed.labels(stage).inc()
            else:
                self.metrics.records_out.labels(self.stage_of_output[out.topic].value).inc()


def _key(slot: Slot) -> RecordKey:
    return (slot.topic, slot.partition, slot.offset)
