"""What each agent's runs read, write and are fed: route's oriented pages, deliver's
classified pages of one-page documents, encoded up front and produced in one go."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from schemas import ClassificationResult, DocumentType, Operation, Options, PageState, Stage
from schemas.pages import BlobRef, OrientationResult
from streams.kafka import clients as kafka
from streams.kafka.envelope import first_record
from streams.routing import next_step
from streams.settings import KafkaSettings
from streams.topics import GPU_CLASSIFY, ORIENTED, PAGES_DONE, RESULTS, TopicSpec, Topology


def oriented(blob_root: str) -> PageState:
    """One page as the GPU node hands it back after orientation (route's input)."""
    page = PageState(
        doc_id="bench-0",
        page_no=1,
        page_count=1,
        operation=Operation.process,
        options=Options(),
        image=BlobRef(
            uri=Path(blob_root, "never-read.png").as_uri(),
            sha256="0" * 64,
            media_type="image/png",
            size_bytes=1,
            width=1000,
            height=1400,
        ),
        last_stage=Stage.orient,
        orientation=OrientationResult.for_rotation(90, 0.97),
        submitted_at=datetime.now(UTC),
    )
    assert next_step(page).topic is GPU_CLASSIFY
    return page


def classified(blob_root: str) -> PageState:
    """The page of a one-page `classify` document, done (deliver's input)."""
    page = oriented(blob_root).model_copy(
        update={
            "operation": Operation.classify,
            "last_stage": Stage.classify,
            "classification": ClassificationResult(
                document_type=DocumentType.invoice, confidence=0.98
            ),
        }
    )
    assert next_step(page).topic is PAGES_DONE
    return page


@dataclass(frozen=True)
class Agent:
    """What one agent's runs read, write and are fed, and the group that commits."""

    name: str
    source: TopicSpec
    sink: TopicSpec
    page: Callable[[str], PageState]
    group: Callable[[Topology], str]


AGENTS = {
    "route": Agent("route", ORIENTED, GPU_CLASSIFY, oriented, lambda t: t.route_group),
    "deliver": Agent("deliver", PAGES_DONE, RESULTS, classified, lambda t: t.deliver_group),
}

Message = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]  # value, key, headers


def copies(page: PageState, n: int) -> list[Message]:
    """n copies of the page, each its own document (doc_id is the key), encoded up front."""
    out: list[Message] = []
    for i in range(n):
        record = page.model_copy(update={"doc_id": f"bench-{i:07d}"})
        rec = first_record("", record.doc_id, record)  # topic chosen at produce time
        out.append((rec.value, rec.key, rec.headers))
    return out


def fill(kafka_settings: KafkaSettings, topic: str, messages: list[Message]) -> None:
    producer = kafka.producer(kafka_settings)
    for value, key, headers in messages:
        while True:
            try:
                producer.produce(topic, value, key, headers=headers)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError(f"{topic}: records still unacknowledged after 120 s")
