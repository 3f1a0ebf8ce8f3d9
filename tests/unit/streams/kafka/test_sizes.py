"""The one gate for record sizes, measured against what a Kafka client actually writes
(aiokafka's own record batch builder, faust's producer) and against the limits derived
from the one setting."""

from __future__ import annotations

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.admin.topics_apply import _declared
from streams.kafka import sizes
from streams.kafka.envelope import Outgoing
from streams.settings import KafkaSettings
from streams.topics import Topology
from tests.support.fuzz import examples

blobs = st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=128, max_size=20_000))
header_lists = st.lists(st.tuples(st.text(max_size=40), st.binary(max_size=500)), max_size=12)


def _batch_bytes(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]],
                 offset_delta: int, timestamp_delta: int) -> int:  # fmt: skip
    """The bytes of a batch that holds the record at `offset_delta` (after fillers), as
    the client builds it; minus the fillers' own bytes."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)  # fmt: skip
    base = 1_700_000_000_000
    fillers = 0
    for n in range(offset_delta):
        meta = builder.append(n, timestamp=base, key=None, value=None, headers=[])
        fillers += meta.size
    builder.append(offset_delta, timestamp=base + timestamp_delta, key=key, value=value,
                   headers=headers)  # fmt: skip
    return len(builder.build()) - fillers


@settings(max_examples=examples(200), deadline=None)
@given(key=blobs, value=blobs, headers=header_lists,
       offset_delta=st.integers(0, 3), timestamp_delta=st.integers(0, 10**12))  # fmt: skip
def test_a_record_never_costs_more_on_the_wire_than_the_gate_counts(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]],
    offset_delta: int, timestamp_delta: int,
) -> None:  # fmt: skip
    measured = sizes.record_bytes(key, value, headers)
    written = _batch_bytes(key, value, headers, offset_delta, timestamp_delta)
    # Never less than the client writes, and no more than the deltas' largest varints over.
    assert written <= measured <= written + 16


@settings(max_examples=examples(200), deadline=None)
@given(key=blobs, value=blobs, slack=st.integers(-200, 200), headers=st.one_of(
    header_lists,  # and names of 4-byte characters, of at most 4 bytes each
    st.lists(st.tuples(st.text(st.characters(min_codepoint=0x10000), min_size=20, max_size=40),
                       st.binary(max_size=10)), min_size=4, max_size=12),
))  # fmt: skip
def test_the_gates_quick_answer_is_its_exact_one(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]], slack: int
) -> None:
    # A bound answers first where it can (most records are far under the limit): at
    # and round the limit too, the answer is the exact count's.
    needs = sizes.record_bytes(key, value, headers) + sizes.HOP_HEADROOM_BYTES
    assert sizes.fits(key, value, iter(headers), needs + slack) is (slack >= 0)


def test_the_gate_leaves_the_next_hop_its_headroom() -> None:
    out = Outgoing("t", b"doc", b"", [("pagestream.event_id", b"x" * 36)])
    room = sizes.room_for_value(out.key, out.headers, 50_000)
    assert Outgoing("t", b"doc", b"v" * room, out.headers).fits(50_000)
    # Never too generous, and a few bytes at most below the exact room (varint widths).
    assert not Outgoing("t", b"doc", b"v" * (room + 16), out.headers).fits(50_000)
    fitting = Outgoing("t", b"doc", b"v" * room, out.headers)
    # What fits leaves a hop's headroom below the limit: route may carry it on.
    assert fitting.size_bytes + sizes.HOP_HEADROOM_BYTES <= 50_000


def test_clients_and_topics_take_what_the_gate_lets_through() -> None:
    kafka = KafkaSettings(max_record_bytes=3_000_000)
    assert kafka.confluent_config()["message.max.bytes"] == 3_000_000
    declared = _declared(Topology(""), None, kafka.max_record_bytes)
    limits = {int(conf["max.message.bytes"]) for conf in declared.values()}
    (topic_limit,) = limits
    # A batch of one record at the limit, compressed at zstd's worst (1/256 more).
    assert topic_limit >= 3_000_000 + 3_000_000 // 256
    assert _declared(Topology(""), None, None)["docs.raw"].get("max.message.bytes") is None


def test_the_room_for_a_value_is_never_too_generous_at_any_limit() -> None:
    # Past 2**20 the record's own length takes another varint byte: counted too.
    hdrs = [("pagestream.event_id", b"x" * 36)]
    for limit in (20_000, 1_049_000, 1_100_000, 5_000_000, 32 * 1024 * 1024):
        room = sizes.room_for_value(b"doc", hdrs, limit)
        assert sizes.fits(b"doc", b"v" * room, hdrs, limit), limit
