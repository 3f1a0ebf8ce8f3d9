"""The record envelope: what every pagestream process reads from and writes to Kafka.

One module for the agents, the GPU node, submit and the DLQ tools:
- `Origin`: a consumed record (topic, partition, offset, timestamp, key, value,
  headers), built from a confluent-kafka `Message` or a faust event;
- `Outgoing`: a record to produce (topic, key, value, headers);
- the standard headers every record carries (event id, schema, W3C traceparent);
- deterministic event ids: an output's id derives from its input's id and the
  step, so a record processed twice (at-least-once agents, a GPU transaction redone
  after a crash) yields byte-identical ids that downstream dedupe recognises;
- trace propagation, one rule: each hop keeps the incoming trace id and opens a
  child span id;
- the one dead-letter builder, whose headers are the ones schemas/headers.py names.
"""

from __future__ import annotations

import hashlib
import random
import traceback
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from schemas import Record, encode, headers
from schemas.errors import RecordError
from streams.kafka import sizes
from streams.telemetry.tracing import current_traceparent

Header = tuple[str, bytes]

# Namespace of derived event ids (uuid5 of "<input event id>:<step>").
EVENT_ID_NAMESPACE = uuid.UUID("0b6f5a4e-2f63-4c7e-9d0e-5d3c8a1f4b21")
# Stack traces can be long; a dead letter must stay far below the broker's limit. In
# UTF-8 bytes, not characters: a message of CJK text is three times its length.
_MAX_STACKTRACE_BYTES = 8_000
_MAX_MESSAGE_BYTES = 1_000


def header_value(pairs: Iterable[Header], name: str) -> str | None:
    """The first header called `name`, decoded (invalid UTF-8 replaced), or None."""
    for key, value in pairs:
        if key == name:
            return value.decode("utf-8", "replace")
    return None


def header_pairs(raw: Any) -> tuple[Header, ...]:
    """Headers as a client hands them over (list of pairs or dict, str/bytes/None
    values) as (str, bytes) pairs."""
    if type(raw) is list and all(type(v) is bytes for _, v in raw):
        return tuple(raw)  # what the clients hand over (every record polled): as it is
    items = raw.items() if isinstance(raw, dict) else (raw or [])
    return tuple((k, v.encode() if isinstance(v, str) else v or b"") for k, v in items)


@dataclass(frozen=True)
class Origin:
    """A consumed record: where it was read from, and its bytes."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)

    # Asked by each output of the record's hop: read once, kept in the instance's
    # __dict__ (which a frozen dataclass lets one write; functools.cached_property costs
    # more than the lookups it saves, a lock taken on each first read).
    def event_source(self) -> str:
        """What the event ids of this record's outputs derive from: its own event id, or
        where it was read when it has none."""
        memo = self.__dict__
        source: str | None = memo.get("_event_source")
        if source is None:
            source = self.header(headers.EVENT_ID)
            if source is None:
                source = f"{self.topic}/{self.partition}/{self.offset}"
            memo["_event_source"] = source
        return source

    def child_traceparent(self) -> str:
        """The span of the hop over this record, when no recorded span says it: one per
        record read, which all its outputs carry."""
        memo = self.__dict__
        span: str | None = memo.get("_child_traceparent")
        if span is None:
            span = memo["_child_traceparent"] = _child_of(self.header(headers.TRACEPARENT))
        return span

    @classmethod
    def from_message(cls, msg: Any) -> Self:
        """From a confluent-kafka `Message` that carries no error."""
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        assert topic is not None and partition is not None and offset is not None  # noqa: S101
        ts_type, ts = msg.timestamp()
        return cls(
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp_ms=ts if ts_type else None,
            key=msg.key(),
            value=msg.value(),
            headers=header_pairs(msg.headers()),
        )

    @classmethod
    def from_faust_event(cls, event: Any) -> Self:
        """From a faust `EventT` (its `.message`: aiokafka's record, seconds timestamps)."""
        msg = event.message
        return cls(
            topic=msg.topic,
            partition=msg.partition,
            offset=msg.offset,
            timestamp_ms=int(msg.timestamp * 1000) if msg.timestamp else None,
            key=msg.key,
            value=msg.value,
            headers=header_pairs(msg.headers),
        )


@dataclass(frozen=True)
class Outgoing:
    """A record to produce."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    partition: int | None = None  # None: the key's partition (murmur2)

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)

    @property
    def size_bytes(self) -> int:
        """What the record costs on the wire, framing included (streams/kafka/sizes.py)."""
        return sizes.record_bytes(self.key, self.value, self.headers)

    def fits(self, max_record_bytes: int) -> bool:
        """Whether it may be produced under `max_record_bytes`: the one gate
        (streams/kafka/sizes.py), with room for the next hop's headers."""
        return sizes.fits(self.key, self.value, self.headers, max_record_bytes)


# ---- standard headers ----------------------------------------------------


def _random_id(bits: int) -> str:
    """A random non-zero trace or span id in hex. Ids need to be unique, not secret: the
    process's PRNG as OpenTelemetry's own id generator uses, not the OS's (a system call
    per record, one of the larger costs of a route hop)."""
    while True:
        value = random.getrandbits(bits)
        if value:
            return f"{value:0{bits // 4}x}"


def new_traceparent() -> str:
    """A fresh W3C trace context (version 00, sampled): the first hop of a trace."""
    return f"00-{_random_id(128)}-{_random_id(64)}-01"


def child_traceparent(parent: str | None) -> str:
    """The same trace as `parent` with a new span id; a new trace if there is none.

    Inside a recorded hop span (streams/telemetry/tracing.py) the new span id is that span's, so
    the next hop's span becomes its child."""
    recorded = current_traceparent()
    return _child_of(parent) if recorded is None else recorded


def _child_of(parent: str | None) -> str:
    parts = parent.split("-") if parent else []
    if len(parts) == 4 and len(parts[1]) == 32 and len(parts[3]) == 2:
        return f"{parts[0]}-{parts[1]}-{_random_id(64)}-{parts[3]}"
    return new_traceparent()


def derived_event_id(origin: Origin, step: str) -> str:
    """The event id of what `step` emits for `origin`: equal every time it is redone."""
    return uuid5(f"{origin.event_source()}:{step}")


# SHA-1 with the namespace already hashed in: copying it is cheaper than a new hash
# object (OpenSSL 3 looks the digest up again for each one).
_NAMESPACE_SHA1 = hashlib.sha1(EVENT_ID_NAMESPACE.bytes)  # noqa: S324 - RFC 4122 name-based ids


# The hex digit of a uuid's variant nibble (RFC 4122: the top two bits 10) for each
# hex digit the hash puts there.
_VARIANT = {f"{n:x}": f"{(n & 0x3) | 0x8:x}" for n in range(16)}


def uuid5(name: str) -> str:
    """str(uuid.uuid5(EVENT_ID_NAMESPACE, name)), the same string (RFC 4122: SHA-1 of the
    namespace and the name, version and variant bits set) at a fraction of the cost:
    every output of every hop derives its id this way. The version and variant are set
    on the hash's hex digits."""
    sha1 = _NAMESPACE_SHA1.copy()
    sha1.update(name.encode())
    x = sha1.hexdigest()
    return f"{x[:8]}-{x[8:12]}-5{x[13:16]}-{_VARIANT[x[16]]}{x[17:20]}-{x[20:32]}"


def standard_headers(record_type: type[Record], *, event_id: str, traceparent: str) -> list[Header]:
    return [
        (headers.EVENT_ID, event_id.encode()),
        (headers.SCHEMA, headers.schema_header(record_type).encode()),
        (headers.TRACEPARENT, traceparent.encode()),
    ]


def first_record(topic: str, key: str, record: Record, *, parent: str | None = None) -> Outgoing:
    """A record that starts a trace (a submission): fresh event id and trace, or a child
    span of `parent`, the W3C traceparent of the request that submitted it (HTTP)."""
    traceparent = child_traceparent(parent) if parent else new_traceparent()
    return Outgoing(
        topic,
        key.encode(),
        encode(record),
        standard_headers(type(record), event_id=str(uuid.uuid4()), traceparent=traceparent),
    )


def next_record(
    topic: str,
    key: str,
    record: Record,
    origin: Origin,
    step: str,
    *,
    value: bytes | None = None,
    partition: int | None = None,
) -> Outgoing:
    """What one hop emits for `origin`: derived event id, child span of its trace.
    `value`: `encode(record)`, when the caller has it already."""
    value = encode(record) if value is None else value
    return hop_record(topic, key, type(record), value, origin, step, partition=partition)


def hop_record(
    topic: str,
    key: str,
    record_type: type[Record],
    value: bytes,
    origin: Origin,
    step: str,
    *,
    partition: int | None = None,
) -> Outgoing:
    """next_record of a record already encoded (`value`, a `record_type`)."""
    return Outgoing(
        topic,
        key.encode(),
        value,
        standard_headers(
            record_type,
            event_id=derived_event_id(origin, step),
            traceparent=current_traceparent() or origin.child_traceparent(),
        ),
        partition,
    )


def tick(topic: str, partition: int) -> Outgoing:
    """An empty record with the tick schema, for one partition (see headers.TICK_SCHEMA)."""
    hdrs = [
        (headers.EVENT_ID, str(uuid.uuid4()).encode()),
        (headers.SCHEMA, headers.TICK_SCHEMA.encode()),
        (headers.TRACEPARENT, new_traceparent().encode()),
    ]
    return Outgoing(topic, None, b"", hdrs, partition)


# ---- dead letters ----------------------------------------------------------


def error_message(exc: BaseException) -> str:
    """One line naming the problem; never the record's content.

    RecordError messages are already safe (schemas.codec makes sure); for other
    exceptions the caller must not put document data into the message.
    """
    try:
        text = exc.reason if isinstance(exc, RecordError) else str(exc)
    except Exception:  # a library's exception whose str() raises must still be reported
        text = f"{type(exc).__name__} (its message could not be read)"
    text = " ".join(text.split()) or type(exc).__name__
    return text.encode()[:_MAX_MESSAGE_BYTES].decode("utf-8", "ignore")


def dead_letter(
    origin: Origin,
    *,
    dlq_topic: str,
    stage: str,
    group: str,
    exc: BaseException,
    attempts: int = 1,
    max_bytes: int | None = None,
    now: datetime | None = None,
) -> Outgoing:
    """`origin`'s key and value untouched, plus headers saying where it came from and why
    it failed (so `pagestream dlq replay` can put it back exactly as it was).

    Above `max_bytes` the value is left out and `VALUE_DROPPED` gives its size (then the
    record's own headers, then its key: `fit_dead_letter`): the coordinates and the
    reason always travel, and the source offset still holds the value while its topic
    retains it.
    """
    trace = "".join(traceback.format_exception(exc)).encode()[-_MAX_STACKTRACE_BYTES:]
    stack = trace.decode("utf-8", "ignore")
    failed_at = (now or datetime.now(UTC)).isoformat()
    # The original headers travel on, minus error headers of an earlier failure.
    kept = [(k, v) for k, v in origin.headers if not k.startswith(headers.ERROR_PREFIX)]
    error = [
        (headers.ERROR_TOPIC, origin.topic),
        (headers.ERROR_PARTITION, str(origin.partition)),
        (headers.ERROR_OFFSET, str(origin.offset)),
        (headers.ERROR_TIMESTAMP, "" if origin.timestamp_ms is None else str(origin.timestamp_ms)),
        (headers.ERROR_STAGE, stage),
        (headers.ERROR_GROUP, group),
        (headers.ERROR_EXCEPTION_CLASS, f"{type(exc).__module__}.{type(exc).__qualname__}"),
        (headers.ERROR_EXCEPTION_MESSAGE, error_message(exc)),
        (headers.ERROR_EXCEPTION_STACKTRACE, stack),
        (headers.ERROR_ATTEMPTS, str(attempts)),
        (headers.ERROR_FAILED_AT, failed_at),
    ]
    letter = Outgoing(
        dlq_topic, origin.key, origin.value, kept + [(k, v.encode()) for k, v in error]
    )
    if max_bytes is not None:
        letter = fit_dead_letter(letter, max_bytes)
    return letter


def fit_dead_letter(letter: Outgoing, max_bytes: int) -> Outgoing:
    """`letter` as it is if it fits in `max_bytes`; else without its value, then without
    the original record's own headers, then without its key, each left out with a
    header giving its size, until it fits. The error headers (the reason and the
    original's coordinates) always travel: a dead letter that never fits would be
    retried forever. Under a small limit the stack trace is cut last, to its end (the
    frames nearest the error), as far as it must be."""
    if letter.fits(max_bytes):
        return letter
    said: list[Header] = []
    if letter.value is not None:
        said.append((headers.VALUE_DROPPED, str(len(letter.value)).encode()))
    slim = Outgoing(letter.topic, letter.key, None, [*letter.headers, *said])
    if slim.fits(max_bytes):
        return slim
    errors = [(k, v) for k, v in letter.headers if k.startswith(headers.ERROR_PREFIX)]
    own = sum(len(k) + len(v) for k, v in letter.headers if not k.startswith(headers.ERROR_PREFIX))
    if own:
        said.append((headers.HEADERS_DROPPED, str(own).encode()))
    slim = Outgoing(letter.topic, letter.key, None, [*errors, *said])
    if slim.fits(max_bytes):
        return slim
    if letter.key is not None:
        said.append((headers.KEY_DROPPED, str(len(letter.key)).encode()))
        slim = Outgoing(letter.topic, None, None, [*errors, *said], partition=letter.partition)
        if slim.fits(max_bytes):
            return slim
    over = slim.size_bytes + sizes.HOP_HEADROOM_BYTES - max_bytes
    cut = [(k, v[min(len(v), over + 8):] if k == headers.ERROR_EXCEPTION_STACKTRACE else v)
           for k, v in errors]  # fmt: skip
    return Outgoing(letter.topic, None, None, [*cut, *said], partition=letter.partition)
