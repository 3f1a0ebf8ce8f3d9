"""A candidate for route's loop, measured beside today's (issue 36, item 4: the transport
chosen by measurement): `python -m bench.agents.batched` is a route worker without faust.

It reads the worker's settings as `pagestream agents` does (PAGESTREAM_*), joins the
same consumer group on the same topics and runs the product's own step
(streams/agents/route.py's `Router.handle`, the records it writes byte for byte), but
moves records in batches with confluent-kafka (librdkafka, in C) in one synchronous
loop: poll a batch, step every record, hand every output to the producer, wait until
all are acknowledged, commit the batch's offsets, poll again. Nothing is in flight
when it polls, so a rebalance (handled inside poll) never finds work under way, and
an input's offset is committed only once its outputs are acknowledged: at-least-once
as today. A batch is what poll has on hand, never waited for to fill.

What it leaves out, being a measurement: the failure policy (a record that fails its
step, or an output the broker refuses, stops the loop instead of going to docs.dlq),
metrics, tracing spans and the worker's web page. The bench feeds it records that
route cleanly, so none of those paths runs in today's worker either.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from types import FrameType

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streams.agents.route import Router
from streams.kafka import clients as kafka
from streams.kafka.envelope import Origin, Outgoing
from streams.settings import Settings
from streams.topics import CLASSIFIED, EXTRACTED, ORIENTED, RECOGNIZED

BATCH = 1000  # at most this many records per poll
POLL_S = 0.1
FLUSH_S = 30.0


def run(settings: Settings) -> None:
    topo = settings.topology
    router = Router(topo, min_confidence=settings.agents.min_confidence,
                    progress=settings.agents.progress_events)  # fmt: skip
    consumer = kafka.consumer(settings.kafka, topo.agents_app)
    producer = kafka.producer(settings.kafka, **{"linger.ms": settings.agents.producer_linger_ms})
    consumer.subscribe([topo.name(t) for t in (ORIENTED, CLASSIFIED, EXTRACTED, RECOGNIZED)])
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    stopping = False

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while not stopping:
            batch = poll_batch(consumer)
            if not batch:
                continue
            outputs = [router.handle(origin) for origin in batch]
            produce_batch(producer, outputs, delivered)
            await_acks(producer, failed)
            commit_batch(consumer, batch)
    finally:
        consumer.close()


# One function per part, so that a profile (bench/agents/profile.py) names each.
def poll_batch(consumer: Consumer) -> list[Origin]:
    batch = consumer.consume(BATCH, POLL_S)
    for msg in batch:
        if msg.error() is not None:
            raise KafkaException(msg.error())
    return [Origin.from_message(msg) for msg in batch]


def produce_batch(
    producer: Producer, outputs: list[list[Outgoing]], delivered: Callable[..., None]
) -> None:
    for outs in outputs:
        for out in outs:
            producer.produce(out.topic, out.value, out.key, headers=out.headers,
                             on_delivery=delivered)  # fmt: skip


def await_acks(producer: Producer, failed: list[KafkaError]) -> None:
    if producer.flush(FLUSH_S) != 0 or failed:
        raise RuntimeError(f"outputs not acknowledged: {failed[:3]}")


def commit_batch(consumer: Consumer, batch: list[Origin]) -> None:
    ends = {(o.topic, o.partition): o.offset + 1 for o in batch}
    consumer.commit(
        offsets=[TopicPartition(t, p, o) for (t, p), o in ends.items()], asynchronous=False
    )


if __name__ == "__main__":
    run(Settings())
    sys.exit(0)
