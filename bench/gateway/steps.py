"""The idle steps, one request at a time: the direct produce (the project's producer),
the gateway's Publisher, a blob write and a POST, each timed in milliseconds."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from typing import Any
from unittest import mock

import httpx
from confluent_kafka import KafkaError, Message, Producer

from bench.gateway.children import TENANT, submit
from bench.gateway.figures import Latency
from bench.gateway.locust import locustfile
from gateway import publish
from schemas import DocumentSubmitted, Operation, Options, Progress
from streams.blobs import BlobStore
from streams.client.progress import record_key
from streams.kafka import clients as kafka
from streams.kafka.envelope import Outgoing, first_record
from streams.settings import KafkaSettings, Settings
from streams.topics import PROGRESS, Topology


def _raw_record(settings: Settings, store: BlobStore, topic: str) -> Outgoing:
    """A docs.raw record as the gateway writes it for the uploaded PDF (claim check: the
    blob's URI, not its bytes), fresh doc_id and event id each time."""
    pdf = locustfile.pdf(int(os.environ.get("PAGESTREAM_BENCH_SEED", "1")))
    blob = store.put(pdf)
    doc_id = uuid.uuid4().hex
    record = DocumentSubmitted.model_validate({
        "doc_id": doc_id,
        "tenant": TENANT,
        "operation": Operation.ocr,
        "options": Options.model_validate({k: v for k, v in locustfile.FIELDS.items()
                                           if k != "operation"}),
        "payload": {"uri": blob.uri, "sha256": blob.sha256, "size_bytes": blob.size_bytes,
                    "media_type": "application/pdf", "filename": "report.pdf"},
    })  # fmt: skip
    return first_record(topic, doc_id, record)


class Direct:
    """The project's producer, one record at a time, each acknowledged before the next."""

    def __init__(self, settings: Settings, store: BlobStore, topic: str) -> None:
        self.producer = kafka.producer(settings.kafka)
        self.settings, self.store, self.topic = settings, store, topic
        self.template = _raw_record(settings, store, topic)

    def _record(self) -> Outgoing:
        # The template with a fresh key (same length): the size is the gateway's.
        return Outgoing(self.topic, uuid.uuid4().hex.encode(), self.template.value,
                        list(self.template.headers))  # fmt: skip

    def flush(self) -> float:
        out = self._record()
        started = time.perf_counter()
        self.producer.produce(out.topic, out.value, out.key, headers=list(out.headers))
        if self.producer.flush(30) != 0:
            raise RuntimeError("a direct record was not acknowledged within 30 s")
        return (time.perf_counter() - started) * 1000

    def callback(self) -> float:
        out = self._record()
        acked: list[KafkaError | None] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            acked.append(err)

        started = time.perf_counter()
        self.producer.produce(out.topic, out.value, out.key, headers=list(out.headers),
                              on_delivery=on_delivery)  # fmt: skip
        while not acked:
            self.producer.poll(0.05)
        if acked[0] is not None:
            raise RuntimeError(f"a direct record failed: {acked[0]}")
        return (time.perf_counter() - started) * 1000


def _publisher(settings: Settings, linger_ms: int | None = None) -> publish.Publisher:
    """The gateway's Publisher; with `linger_ms`, its producer built with that linger.ms
    instead (the producer factory wrapped while it is built: no code changed)."""
    if linger_ms is None:
        return publish.Publisher(settings)
    original = kafka.producer

    def lingering(conf: KafkaSettings, **overrides: Any) -> Producer:
        return original(conf, **{**overrides, "linger.ms": linger_ms})

    with mock.patch.object(kafka, "producer", lingering):
        return publish.Publisher(settings)


Steps = dict[str, Callable[[], float]]


def idle_steps(
    settings: Settings, store: BlobStore, direct: Direct, client: httpx.Client, topo: Topology
) -> tuple[Steps, Callable[[], None]]:
    """Each idle step as a callable returning its latency in ms, and how to close them."""
    loop = asyncio.new_event_loop()
    publishers = {"": _publisher(settings), "0": _publisher(settings, linger_ms=0)}
    pdf = locustfile.pdf(int(os.environ.get("PAGESTREAM_BENCH_SEED", "1")))

    def two(pub: publish.Publisher) -> float:
        doc_id = uuid.uuid4().hex
        raw = Outgoing(direct.topic, doc_id.encode(), direct.template.value,
                       list(direct.template.headers))  # fmt: skip
        progress = first_record(topo.name(PROGRESS), record_key(doc_id, None),
                                Progress(doc_id=doc_id, pages_total=0, stage="submitted",
                                         tenant=TENANT))  # fmt: skip

        async def both() -> None:
            await pub.publish(raw)
            await pub.publish(progress)

        started = time.perf_counter()
        loop.run_until_complete(both())
        return (time.perf_counter() - started) * 1000

    def one() -> float:
        raw = Outgoing(direct.topic, uuid.uuid4().hex.encode(), direct.template.value,
                       list(direct.template.headers))  # fmt: skip
        started = time.perf_counter()
        loop.run_until_complete(publishers[""].publish(raw))
        return (time.perf_counter() - started) * 1000

    def blob() -> float:
        started = time.perf_counter()
        writer = store.writer()
        writer.write(pdf)
        writer.commit()
        return (time.perf_counter() - started) * 1000

    def post() -> float:
        started = time.perf_counter()
        sent = submit(client)
        elapsed = (time.perf_counter() - started) * 1000
        assert sent.status_code == 202, sent.text
        return elapsed

    def close() -> None:
        for pub in publishers.values():
            pub.close()
        loop.close()

    steps: dict[str, Callable[[], float]] = {
        "produce + flush": direct.flush,
        "produce, ack callback": direct.callback,
        "Publisher, 1 record": one,
        "Publisher, docs.raw + docs.progress": lambda: two(publishers[""]),
        "Publisher linger 0, docs.raw + docs.progress": lambda: two(publishers["0"]),
        "blob write + commit": blob,
        "POST /v1/documents": post,
    }
    return steps, close


def measure_idle(steps: dict[str, Callable[[], float]], rounds: int) -> dict[str, Latency]:
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(3):  # connections, first batches
        for step in steps.values():
            step()
    for _ in range(rounds):
        for name, step in steps.items():
            samples[name].append(step())
    return {name: Latency.of(values) for name, values in samples.items()}
