"""route as a plain function: a page back from a GPU stage -> its next topic (next_step)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from schemas import ClassificationResult, DocumentType, Operation, Options, PageState, Stage, encode
from schemas import headers as h
from schemas.errors import RecordError
from schemas.pages import BlobRef, OrientationResult
from streams.agents.failure_policy import RecordHandling
from streams.agents.metrics import AgentMetrics
from streams.agents.route import Router
from streams.blobs import BlobStoreUnavailableError
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing, derived_event_id
from streams.topics import (
    CLASSIFIED,
    DLQ,
    GPU_CLASSIFY,
    GPU_EXTRACT,
    ORIENTED,
    PAGES_DONE,
    Topology,
)

TOPO = Topology("t.")


def _page(operation: Operation, last: Stage, **fields: object) -> PageState:
    return PageState(
        doc_id="d1",
        page_no=1,
        page_count=1,
        operation=operation,
        options=Options(),
        image=BlobRef(uri="file:///b/x.png", sha256="0" * 64, media_type="image/png", size_bytes=1),
        last_stage=last,
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        **fields,  # type: ignore[arg-type]
    )


def _origin(topic: str, value: bytes, schema: bytes = b"PageState/1") -> Origin:
    return Origin(topic, 0, 5, None, b"d1", value,
                  ((h.EVENT_ID, b"evt-1"), (h.SCHEMA, schema)))  # fmt: skip


ROUTER = Router(TOPO, min_confidence=0.6)
ORIENTED_PAGE = _page(
    Operation.process, Stage.orient, orientation=OrientationResult.for_rotation(0, 0.9)
)


def test_an_oriented_process_page_goes_to_classify() -> None:
    origin = _origin(TOPO.name(ORIENTED), encode(ORIENTED_PAGE))
    (out,) = ROUTER.handle(origin)
    assert out.topic == TOPO.name(GPU_CLASSIFY) and out.key == b"d1"
    assert out.value == origin.value  # route moves the page; it changes nothing in it
    assert out.header(h.EVENT_ID) == derived_event_id(origin, "route")


def test_a_page_goes_on_as_it_came_unless_an_older_schema_wrote_it() -> None:
    # Its bytes, validated, are not encoded again; under another schema header they are
    # (a defaults-free spelling stands in for what an older version wrote).
    terse = ORIENTED_PAGE.model_dump_json(exclude_defaults=True).encode()
    assert terse != encode(ORIENTED_PAGE)
    (same,) = ROUTER.handle(_origin(TOPO.name(ORIENTED), terse))
    (again,) = ROUTER.handle(_origin(TOPO.name(ORIENTED), terse, b"PageState/0"))
    assert same.value is terse
    assert again.value == encode(ORIENTED_PAGE)
    assert again.header(h.SCHEMA) == "PageState/1"


def test_a_confident_classification_goes_to_extract_and_a_doubtful_one_is_done() -> None:
    def classified(confidence: float) -> bytes:
        cls = ClassificationResult(document_type=DocumentType.rg_front, confidence=confidence)
        return encode(ORIENTED_PAGE.model_copy(update={"last_stage": Stage.classify,
                                                       "classification": cls}))  # fmt: skip

    (sure,) = ROUTER.handle(_origin(TOPO.name(CLASSIFIED), classified(0.95)))
    (unsure,) = ROUTER.handle(_origin(TOPO.name(CLASSIFIED), classified(0.2)))
    assert sure.topic == TOPO.name(GPU_EXTRACT)
    assert unsure.topic == TOPO.name(PAGES_DONE)


def test_a_page_that_does_not_parse_is_dead_lettered_with_the_reason() -> None:
    # route raises; RecordHandling, the agents' one fault path, dead-letters the record.
    origin = _origin(TOPO.name(ORIENTED), b'{"doc_id": "d1", "page_no": 0}')
    with pytest.raises(RecordError):
        ROUTER.handle(origin)
    sent: list[Outgoing] = []

    async def send(outputs: list[Outgoing]) -> None:
        sent.extend(outputs)

    async def step(o: Origin) -> list[Outgoing]:
        return ROUTER.handle(o)

    dead_letters = DeadLetters(TOPO.name(DLQ), group="g", max_record_bytes=1_000_000)
    handling = RecordHandling(send, dead_letters=dead_letters)
    (dead,) = asyncio.run(handling.run("route", origin, step))
    assert sent == [dead]
    assert dead.topic == TOPO.name(DLQ) and dead.value == origin.value
    assert dead.header(h.ERROR_STAGE) == "route"
    assert dead.header(h.ERROR_EXCEPTION_CLASS) == "schemas.errors.RecordError"


def test_a_broker_that_refuses_even_the_dead_letter_gets_its_error_headers_alone() -> None:
    # The broker's limit is below ours: it refuses the output, then the dead letter that
    # still carries the record's own headers. Before, the second refusal escaped (not the
    # world's fault) and stopped the agent, on every redelivery.
    from aiokafka.errors import MessageSizeTooLargeError

    big = tuple((f"x-{n}", b"y" * 1_000) for n in range(50))  # 50 KB of headers
    origin = Origin(TOPO.name(ORIENTED), 0, 3, None, b"d1", b"{}", big)
    sent: list[Outgoing] = []

    async def send(outputs: list[Outgoing]) -> None:
        if any(o.size_bytes > 20_000 for o in outputs):  # the broker's smaller limit
            raise MessageSizeTooLargeError()
        sent.extend(outputs)

    async def step(o: Origin) -> list[Outgoing]:
        return [Outgoing(TOPO.name(GPU_CLASSIFY), b"d1", b"x" * 30_000, list(o.headers))]

    dead_letters = DeadLetters(TOPO.name(DLQ), group="g", max_record_bytes=1_000_000)
    (dead,) = asyncio.run(RecordHandling(send, dead_letters=dead_letters).run("route", origin,
                                                                              step))  # fmt: skip
    assert sent == [dead] and dead.topic == TOPO.name(DLQ) and dead.size_bytes <= 20_000
    assert dead.header(h.ERROR_EXCEPTION_CLASS) == "aiokafka.errors.MessageSizeTooLargeError"
    assert dead.header(h.HEADERS_DROPPED) is not None


def test_a_world_failure_is_retried_and_counted_by_stage_and_error_a_record_failure_is_not() -> (
    None
):
    metrics = AgentMetrics(CollectorRegistry(), TOPO.name(DLQ))
    origin = _origin(TOPO.name(ORIENTED), encode(ORIENTED_PAGE))
    failures = [BlobStoreUnavailableError("the store is down"), None]
    sent: list[Outgoing] = []

    async def send(outputs: list[Outgoing]) -> None:
        sent.extend(outputs)

    async def step(o: Origin) -> list[Outgoing]:
        failure = failures.pop(0)
        if failure is not None:
            raise failure
        return ROUTER.handle(o)

    dead_letters = DeadLetters(TOPO.name(DLQ), group="g", max_record_bytes=1_000_000)
    handling = RecordHandling(send, dead_letters=dead_letters, retries=metrics.retries,
                              retry_initial_s=0.001)  # fmt: skip
    (out,) = asyncio.run(handling.run("route", origin, step))

    assert out.topic == TOPO.name(GPU_CLASSIFY) and sent == [out]
    registry = metrics.registry
    labels = {"stage": "route", "error": "BlobStoreUnavailableError"}
    assert registry.get_sample_value("pagestream_agent_retries_total", labels) == 1
    # A record's own fault is dead-lettered at once: never counted as a retry.
    bad = _origin(TOPO.name(ORIENTED), b'{"doc_id": "d1", "page_no": 0}')
    failures.append(None)
    (dead,) = asyncio.run(handling.run("route", bad, step))
    assert dead.topic == TOPO.name(DLQ)
    assert registry.get_sample_value("pagestream_agent_retries_total", labels) == 1
