"""The agents' failure policy: each record is handled so that none is ever lost: the
world's failures are retried, the record's failures are dead-lettered, and nothing
escapes to faust.

faust acknowledges the event in hand when an agent raises (the stream's `finally`
acks it) and then restarts the agent: an exception there is a record acknowledged
with no output and no dead letter. So every agent runs each record through
`RecordHandling.run`, which returns only once the record's outputs are acknowledged
by the broker:

- the world's fault (streams/faults.py's `is_worlds_fault`: the blob store
  unavailable, the broker refusing or unreachable): the same record is tried again with
  capped exponential backoff, as long as it takes;
  its outputs carry deterministic event ids, so a send repeated after an unclear
  failure is a duplicate that downstream dedupe absorbs;
- the record's fault (anything else the step raises, an output over the record size
  limit, a record the broker refuses as too large): the record goes to docs.dlq with
  the reason, its value dropped (and a header saying so) if it would not fit. The dead
  letter is built, logged and counted by streams/kafka/dead_letters.py's
  `DeadLetters`.

notify pipelines its dead letters (streams/agents/ack_window.py; route and deliver have
their own batched loop and the same rules: batches.py): `start` runs the
step and hands its outputs to the producer without waiting, `settle` later waits for
their acknowledgements with the same rules as `run` (a world error re-sends the same
outputs until they are acknowledged; a refusal as too large sends the dead letter).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiokafka.errors import MessageSizeTooLargeError
from prometheus_client import Counter
from tenacity import AsyncRetrying, retry_if_exception, wait_exponential

from streams.faults import is_worlds_fault
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing

log = logging.getLogger(__name__)

Step = Callable[[Origin], Awaitable[list[Outgoing]]]
Send = Callable[[list[Outgoing]], Awaitable[None]]
# Hands outputs to the producer; one future per output, done when the broker acknowledged it.
Submit = Callable[[list[Outgoing]], Awaitable[list[asyncio.Future[Any]]]]


@dataclass(frozen=True, slots=True)
class Sent:
    """A record's outputs handed to the producer, and their acknowledgements to come."""

    outputs: list[Outgoing]
    acks: list[asyncio.Future[Any]]


class RecordHandling:
    def __init__(
        self,
        send: Send,
        *,
        submit: Submit | None = None,
        dead_letters: DeadLetters,
        retries: Counter | None = None,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 30.0,
    ) -> None:
        self._send = send
        self._submit = submit
        self._dead_letters = dead_letters
        self._retries = retries  # pagestream_agent_retries_total, by stage and error
        self._retry_initial_s = retry_initial_s
        self._wait = wait_exponential(multiplier=retry_initial_s, max=retry_max_s)

    async def send(self, outputs: list[Outgoing]) -> None:
        """Send and wait for the acknowledgements, retrying the world's failures."""
        async for attempt in self._retrying("send", None):
            with attempt:
                await self._send(outputs)
        self._dead_letters.sent(outputs)

    async def run(self, stage: str, origin: Origin, step: Step) -> list[Outgoing]:
        """`step(origin)`'s outputs, or a dead letter of `origin`, sent and acknowledged."""
        async for attempt in self._retrying(stage, origin):
            with attempt:
                outputs = await self._outputs(stage, origin, step)
                return self._sent(await self._send_or_dead_letter(stage, origin, outputs))
        raise AssertionError("unreachable: tenacity retries until success")  # pragma: no cover

    async def start(self, stage: str, origin: Origin, step: Step) -> Sent:
        """`step(origin)`'s outputs (or a dead letter of `origin`) handed to the producer,
        unacknowledged: `settle` waits for them. The step's world errors, and the
        producer's refusal to take a record (it cannot reach the cluster), are retried
        here as in `run`."""
        try:  # the usual case, without the cost of setting up tenacity for every record
            return await self._start(stage, origin, step)
        except Exception as exc:
            if not is_worlds_fault(exc):
                raise
            self._retried(stage, origin, _Failed(exc))
            await asyncio.sleep(self._retry_initial_s)  # then tenacity's backoff
        async for attempt in self._retrying(stage, origin):
            with attempt:
                return await self._start(stage, origin, step)
        raise AssertionError("unreachable: tenacity retries until success")  # pragma: no cover

    async def settle(self, stage: str, origin: Origin, sent: Sent) -> list[Outgoing]:
        """The outputs `start` handed over once the broker acknowledged all of them (or
        the dead letter sent instead, when the broker refused one as too large)."""
        refused: MessageSizeTooLargeError | None = None
        try:
            for ack in sent.acks:
                await ack
            return self._sent(sent.outputs)
        except MessageSizeTooLargeError as exc:
            # The broker's limit is below ours: the record's fault, not the world's.
            refused = exc
            outputs = sent.outputs
        except Exception as exc:
            if not is_worlds_fault(exc):
                raise
            # The same outputs again (not the step again: it ran, and deliver's step
            # changed its table), as long as it takes; byte-identical, so a copy the
            # broker kept after all is a duplicate downstream dedupe absorbs.
            self._retried(stage, origin, _Failed(exc))
            outputs = sent.outputs
        async for attempt in self._retrying(stage, origin):
            with attempt:
                if refused is not None:  # built here: keeping its value aside may need retries
                    outputs = [self._dead_letters.letter(stage, origin, refused,
                                                         without_value=True)]  # fmt: skip
                return self._sent(await self._send_or_dead_letter(stage, origin, outputs))
        raise AssertionError("unreachable: tenacity retries until success")  # pragma: no cover

    def _retrying(self, stage: str, origin: Origin | None) -> AsyncRetrying:
        """Retries of the world's failures, with backoff, for as long as it takes."""
        return AsyncRetrying(
            retry=retry_if_exception(is_worlds_fault),
            wait=self._wait,
            before_sleep=lambda state: self._retried(stage, origin, state.outcome),
            reraise=True,
        )

    def _retried(self, stage: str, origin: Origin | None, outcome: object) -> None:
        exc = _log_retry(stage, origin, outcome)
        if self._retries is not None:
            self._retries.labels(stage, type(exc).__name__).inc()

    def _sent(self, outputs: list[Outgoing]) -> list[Outgoing]:
        """`outputs`, acknowledged: their dead letters are counted, once."""
        self._dead_letters.sent(outputs)
        return outputs

    async def _start(self, stage: str, origin: Origin, step: Step) -> Sent:
        assert self._submit is not None, "start needs a submit"  # noqa: S101
        outputs = await self._outputs(stage, origin, step)
        try:
            return Sent(outputs, await self._submit(outputs))
        except MessageSizeTooLargeError as exc:
            # Refused before it left (over the producer's max request size): the
            # record's fault, as when the broker refuses it.
            outputs = [self._dead_letters.letter(stage, origin, exc, without_value=True)]
            try:
                return Sent(outputs, await self._submit(outputs))
            except MessageSizeTooLargeError:  # even so: the error headers alone
                outputs = [self._dead_letters.bare(outputs[0])]
                return Sent(outputs, await self._submit(outputs))

    async def _send_or_dead_letter(
        self, stage: str, origin: Origin, outputs: list[Outgoing]
    ) -> list[Outgoing]:
        """Send and await the acks; what went out (the dead letter if the broker refused
        an output as too large: its limit is below ours, the record's fault)."""
        try:
            await self._send(outputs)
        except MessageSizeTooLargeError as exc:
            outputs = [self._dead_letters.letter(stage, origin, exc, without_value=True)]
            try:
                await self._send(outputs)
            except MessageSizeTooLargeError:
                # Refused again (the record's own headers or key are past the broker's
                # limit, which is below ours): the error headers alone, which always fit.
                outputs = [self._dead_letters.bare(outputs[0])]
                await self._send(outputs)
        return outputs

    async def _outputs(self, stage: str, origin: Origin, step: Step) -> list[Outgoing]:
        try:
            outputs = await step(origin)
        except Exception as exc:
            if is_worlds_fault(exc):
                raise
            return [self._dead_letters.letter(stage, origin, exc)]
        return self._dead_letters.fit(stage, origin, outputs)


@dataclass(frozen=True)
class _Failed:
    """An exception in the shape _log_retry reads from tenacity's outcome."""

    error: BaseException

    def exception(self) -> BaseException:
        return self.error


def _log_retry(stage: str, origin: Origin | None, outcome: object) -> BaseException | None:
    exc: BaseException | None = getattr(outcome, "exception", lambda: None)()
    where = "" if origin is None else f" {origin.topic}[{origin.partition}]@{origin.offset}"
    log.warning("%s%s will be retried: %s: %s", stage, where, type(exc).__name__, exc)
    return exc
