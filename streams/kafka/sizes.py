"""The one gate for record sizes: what a record costs on the wire, and the limits derived
from the one setting (`PAGESTREAM_KAFKA__MAX_RECORD_BYTES`).

Every producer of both processes measures its records here before it produces them:
the agents (`DeadLetters.fit`, RecordHandling), deliver's table changelog (the bytes
faust writes), the GPU node's outcomes, notify, and `dlq replay`. An output that would
not fit is moved to the blob store first where it can be (claim checks,
streams/claim_check.py), and is the record's fault otherwise: it never reaches a client
that would refuse it (or a faust producer buffer that would crash the worker on it).

A record is measured as the broker counts it: Kafka's v2 record (length, attributes,
timestamp and offset deltas, key, value, headers, each length a varint), inside a batch
of its own (the 61-byte batch header), with the deltas at their largest. On top, every
record leaves `HOP_HEADROOM_BYTES` free: the next hop carries a page on with its own
headers (event id, trace parent, timings), so a record that fits here still fits when
route or deliver passes it on. Without that headroom a GPU result just under the limit
was dead-lettered by route, one hop later, and its document waited for its deadline.

The clients' and the topics' limits derive from the same setting, so nothing that
passes the gate can be refused for its size by a client or a broker pagestream set up:
- librdkafka's `message.max.bytes` and aiokafka's `max_request_size`: the limit;
- the topics' `max.message.bytes` (`topics apply`): the limit, plus what compression
  may add to an incompressible batch (zstd's bound: 1/256 of it, plus its frame).
"""

from __future__ import annotations

from collections.abc import Iterable

# Kafka's record batch v2 header: base offset 8, length 4, leader epoch 4, magic 1,
# CRC 4, attributes 2, last offset delta 4, base and max timestamps 8 + 8, producer id
# 8, producer epoch 2, base sequence 4, record count 4.
BATCH_HEADER_BYTES = 61
# Attributes (1), the largest timestamp delta (a varlong: 10) and offset delta (5).
_RECORD_FIXED_BYTES = 1 + 10 + 5
# What a later hop may add to a record it carries on: its own standard headers in place
# of these (schemas/headers.py), a timing header, an error header on a failed page.
HOP_HEADROOM_BYTES = 1024

Header = tuple[str, bytes]


def _varint_bytes(n: int) -> int:
    """Bytes of `n` as a Kafka (zigzag) varint."""
    z = (n << 1) ^ (n >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def _field_bytes(data: bytes | None) -> int:
    """A nullable bytes field: its varint length (-1 for null), then its bytes."""
    if data is None:
        return _varint_bytes(-1)
    return _varint_bytes(len(data)) + len(data)


def record_bytes(key: bytes | None, value: bytes | None, headers: Iterable[Header] = ()) -> int:
    """What a record costs on the wire in a batch of its own: key, value, headers and
    framing (Kafka's v2 record format, deltas at their largest)."""
    pairs = list(headers)
    body = _RECORD_FIXED_BYTES + _field_bytes(key) + _field_bytes(value)
    body += _varint_bytes(len(pairs))
    for name, data in pairs:
        body += _field_bytes(name.encode()) + _field_bytes(data)
    return BATCH_HEADER_BYTES + _varint_bytes(body) + body


def fits(
    key: bytes | None, value: bytes | None, headers: Iterable[Header], max_record_bytes: int
) -> bool:
    """Whether a record may be produced under `max_record_bytes`, with room for the next
    hop's headers."""
    pairs = list(headers)
    if _most_bytes(key, value, pairs) + HOP_HEADROOM_BYTES <= max_record_bytes:
        return True  # every output of every hop is measured: most are far under
    return record_bytes(key, value, pairs) + HOP_HEADROOM_BYTES <= max_record_bytes


def _most_bytes(key: bytes | None, value: bytes | None, pairs: list[Header]) -> int:
    """At least `record_bytes`: every varint at its widest (5 bytes), a header name's
    UTF-8 at 4 bytes a character; a third of its cost."""
    framing = BATCH_HEADER_BYTES + 5 + _RECORD_FIXED_BYTES + 15
    header_bytes = sum(10 + 4 * len(name) + len(data) for name, data in pairs)
    return framing + len(key or b"") + len(value or b"") + header_bytes


def room_for_value(key: bytes | None, headers: Iterable[Header], max_record_bytes: int) -> int:
    """The largest value a record with this key and these headers may carry."""
    # A value's varint length, and the record's, grow by a byte per 7 bits: both
    # counted at their largest (5 bytes), so the answer is never too generous.
    empty = record_bytes(key, b"", headers)
    used = empty - _field_bytes(b"") + 5 + (5 - _varint_bytes(empty - BATCH_HEADER_BYTES))
    return max(0, max_record_bytes - HOP_HEADROOM_BYTES - used)


def topic_max_message_bytes(max_record_bytes: int) -> int:
    """The topics' `max.message.bytes` for records up to `max_record_bytes`: a batch of
    one such record, compressed at zstd's worst (incompressible bytes grow by 1/256
    and a frame header), is still accepted."""
    return max_record_bytes + max_record_bytes // 256 + 1024
