"""Dead letters, built, logged and counted in one place.

When a failure is the record's fault (streams/faults.py decides whose fault it is), the
record goes to docs.dlq with the reason. `DeadLetters` is the only place that builds
such a dead letter (with streams/kafka/envelope.py's `dead_letter`), logs it and counts
it (pagestream_dead_letters_total, streams/telemetry/metrics.py), for the agents
(through streams/agents/failure_policy.py) and the GPU node (through its loop) alike.

Neither Kafka client is imported here, so each process loads only its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from schemas import headers
from streams.faults import OutputTooLargeError, WorldError
from streams.kafka.envelope import Origin, Outgoing, dead_letter, fit_dead_letter

if TYPE_CHECKING:
    from prometheus_client import Counter

    from streams.blobs import BlobStore

log = logging.getLogger(__name__)


class DeadLetters:
    """Dead letters of one consumer group: built, logged and counted one way.

    `letter` builds (and logs) the dead letter of a record; `fit` makes a step's
    outputs fit the record limit; `sent` counts the dead letters among outputs the
    broker acknowledged, so a dead letter is counted once, when it is written.
    """

    def __init__(
        self,
        dlq_topic: str,
        *,
        group: str,
        max_record_bytes: int,
        counter: Counter | None = None,
        blobs: BlobStore | None = None,
    ) -> None:
        self.dlq_topic = dlq_topic
        self.group = group
        self.max_record_bytes = max_record_bytes
        self._counter = counter
        # Where a value too large for its dead letter is kept, so replay can send the
        # original bytes back (without one, the value is dropped and only its size says
        # it was there).
        self._blobs = blobs

    def letter(
        self,
        stage: str,
        origin: Origin,
        exc: BaseException,
        *,
        attempts: int = 1,
        without_value: bool = False,
    ) -> Outgoing:
        """`origin` as a dead letter for `exc`, fitted to the record limit; with
        `without_value` its value goes aside whatever its size (the broker refused the
        record as too large: its limit is below ours)."""
        # Coordinates and the exception's class only: never the record's content.
        log.warning("%s: dead letter %s[%d]@%d %s", stage, origin.topic, origin.partition,
                    origin.offset, type(exc).__name__)  # fmt: skip
        letter = dead_letter(origin, dlq_topic=self.dlq_topic, stage=stage, group=self.group,
                             exc=exc, attempts=attempts)  # fmt: skip
        return self._fitted(letter, without_value=without_value)

    def fit(self, stage: str, origin: Origin, outputs: list[Outgoing]) -> list[Outgoing]:
        """`outputs` as they may be sent: dead letters among them fitted to the record
        limit; if any other output is over it, only the dead letter of `origin` (an
        OutputTooLargeError)."""
        fitted: list[Outgoing] = []
        for out in outputs:
            if self.is_dead_letter(out):
                fitted.append(self._fitted(out))
            elif not out.fits(self.max_record_bytes):
                too_large = OutputTooLargeError(
                    f"{stage} output to {out.topic} is {out.size_bytes} bytes, over the "
                    f"record limit of {self.max_record_bytes}"
                )
                return [self.letter(stage, origin, too_large)]
            else:
                fitted.append(out)
        return fitted

    def bare(self, letter: Outgoing) -> Outgoing:
        """`letter` with the error headers alone (the reason and the original's
        coordinates), and what it left out named: for a broker that refused even the
        fitted letter."""
        return fit_dead_letter(letter, 0)

    def _fitted(self, letter: Outgoing, *, without_value: bool = False) -> Outgoing:
        if letter.value is not None and (without_value or not letter.fits(self.max_record_bytes)):
            letter = self._value_aside(letter)
        return fit_dead_letter(letter, self.max_record_bytes)

    def _value_aside(self, letter: Outgoing) -> Outgoing:
        """The letter without its value, which goes to the blob store when there is one
        (`VALUE_REF` names it); `VALUE_DROPPED` gives its size either way.

        A blob store that is unavailable raises (a `WorldError`): the record is retried
        later like any record the world failed, since a letter without its value could
        not be replayed. Anything else the store says is logged and the letter goes out
        without the value (its coordinates still name the original while its topic
        retains it)."""
        assert letter.value is not None  # noqa: S101 - checked by the caller
        said = [(headers.VALUE_DROPPED, str(len(letter.value)).encode())]
        if self._blobs is not None:
            try:
                said.append((headers.VALUE_REF, self._blobs.put(letter.value).uri.encode()))
            except WorldError:
                raise
            except Exception as exc:  # the letter must go out: without the value, then
                log.warning("dead letter to %s: value of %d bytes not kept (%s)",
                            letter.topic, len(letter.value), type(exc).__name__)  # fmt: skip
        return Outgoing(letter.topic, letter.key, None, [*letter.headers, *said],
                        partition=letter.partition)  # fmt: skip

    def is_dead_letter(self, out: Outgoing) -> bool:
        return out.topic == self.dlq_topic

    def sent(self, outputs: Iterable[Outgoing]) -> int:
        """Counts the dead letters among `outputs`, acknowledged by the broker; how many."""
        letters = [out for out in outputs if self.is_dead_letter(out)]
        if self._counter is not None:
            for letter in letters:
                stage = letter.header(headers.ERROR_STAGE) or "unknown"
                # The class name without its module: short in dashboards, stable when
                # code moves.
                error_class = letter.header(headers.ERROR_EXCEPTION_CLASS) or "unknown"
                self._counter.labels(stage, error_class.rsplit(".", 1)[-1]).inc()
        return len(letters)
