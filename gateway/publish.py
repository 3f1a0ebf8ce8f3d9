"""Records produced from request handlers, each awaited until the broker has it.

A submission is answered 202 only once docs.raw has acknowledged it (acks=all, the
idempotent producer), so a client never holds a doc_id the pipeline does not; when the
broker does not acknowledge within `submit_timeout_s`, the answer is 503 and the client
retries (with its Idempotency-Key, the retry names the same document).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from confluent_kafka import KafkaError, Message

from streams.kafka import clients as kafka
from streams.kafka.envelope import Outgoing
from streams.settings import Settings

log = logging.getLogger(__name__)


_OnDelivery = Callable[[KafkaError | None, Message], None]


class PublishError(RuntimeError):
    """The broker did not take the record (down, refusing, or too slow)."""


class Publisher:
    def __init__(self, settings: Settings) -> None:
        timeout_ms = int(settings.api.submit_timeout_s * 1000)
        self._timeout_s = settings.api.submit_timeout_s
        # librdkafka gives up on its own at the same deadline, so a record the client was
        # told failed is not delivered behind its back much later.
        # linger.ms 0: each request waits for its own record; batching would only add
        # latency to every answer (bench/gateway.py measured 2 ms per record).
        self._producer = kafka.producer(
            settings.kafka,
            **{"message.timeout.ms": timeout_ms, "linger.ms": 0},
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="pagestream-publish", daemon=True)
        self._thread.start()

    async def publish(self, out: Outgoing) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            def settle() -> None:
                if done.done():
                    return
                if err is None:
                    done.set_result(None)
                else:
                    done.set_exception(PublishError(err.str()))

            loop.call_soon_threadsafe(settle)

        try:
            self._produce(out, on_delivery)
        except BufferError as exc:
            raise PublishError("the producer's queue is full") from exc
        except Exception as exc:  # KafkaException: the client refused it outright
            raise PublishError(str(exc)) from exc
        try:
            await asyncio.wait_for(done, self._timeout_s + 1)
        except TimeoutError:
            raise PublishError(f"no acknowledgement within {self._timeout_s:g} s") from None

    def publish_later(self, out: Outgoing) -> None:
        """Produce `out` without waiting: a failure is logged (by topic and key only)."""

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                log.warning(
                    "api: a record to %s (key %s) failed: %s",
                    msg.topic(),
                    (msg.key() or b"").decode(errors="replace"),
                    err.str(),
                )

        try:
            self._produce(out, on_delivery)
        except Exception as exc:  # BufferError, KafkaException: logged, never raised
            log.warning("api: a record to %s was not produced: %s", out.topic, exc)

    def _produce(
        self, out: Outgoing, on_delivery: Callable[[KafkaError | None, Message], None]
    ) -> None:
        self._producer.produce(
            out.topic,
            key=out.key,
            value=out.value,
            headers=list(out.headers),
            on_delivery=on_delivery,
        )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._producer.flush(5)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)
