"""The record envelope: dead-letter headers, event ids, trace propagation, sizes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from schemas import DocumentResult, Operation, RecordError, headers
from streams.kafka.envelope import (
    EVENT_ID_NAMESPACE,
    Origin,
    child_traceparent,
    dead_letter,
    derived_event_id,
    error_message,
    first_record,
    header_pairs,
    next_record,
    uuid5,
)


def test_headers_name_origin_and_reason_and_keep_the_original_headers():
    origin = Origin(
        topic="gpu.classify",
        partition=3,
        offset=42,
        timestamp_ms=1_700_000_000_000,
        key=b"doc-1",
        value=b"{}",
        headers=(
            (headers.EVENT_ID, b"e1"),
            (headers.ERROR_STAGE, b"stale-from-an-earlier-failure"),
        ),
    )
    try:
        raise RecordError("page_no: Input should be greater than or equal to 1")
    except RecordError as exc:
        letter = dead_letter(
            origin, dlq_topic="docs.dlq", stage="classify", group="pagestream-gpu", exc=exc,
            attempts=2, now=datetime(2026, 1, 1, tzinfo=UTC),
        )  # fmt: skip
    assert (letter.topic, letter.key, letter.value) == ("docs.dlq", origin.key, origin.value)
    got = letter.headers
    h = dict(got)
    assert set(headers.ERROR_HEADERS) <= set(h)
    assert h[headers.EVENT_ID] == b"e1"
    assert [k for k, _ in got].count(headers.ERROR_STAGE) == 1  # the stale one is replaced
    assert h[headers.ERROR_STAGE] == b"classify"
    assert h[headers.ERROR_TOPIC] == b"gpu.classify"
    assert h[headers.ERROR_PARTITION] == b"3"
    assert h[headers.ERROR_OFFSET] == b"42"
    assert h[headers.ERROR_TIMESTAMP] == b"1700000000000"
    assert h[headers.ERROR_ATTEMPTS] == b"2"
    assert h[headers.ERROR_EXCEPTION_CLASS] == b"schemas.errors.RecordError"
    assert b"page_no" in h[headers.ERROR_EXCEPTION_MESSAGE]
    assert b"Traceback" in h[headers.ERROR_EXCEPTION_STACKTRACE]
    assert h[headers.ERROR_FAILED_AT] == b"2026-01-01T00:00:00+00:00"


def test_error_message_is_one_bounded_line():
    msg = error_message(ValueError("line one\nline two " + "x" * 5000))
    assert "\n" not in msg and len(msg) <= 1000
    assert error_message(ValueError()) == "ValueError"


def _origin(*pairs: tuple[str, bytes], value: bytes = b"{}", key: bytes = b"doc-1") -> Origin:
    return Origin("docs.raw", 1, 9, None, key, value, pairs)


def test_each_hop_keeps_the_trace_and_opens_a_child_span() -> None:
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    child = child_traceparent(f"00-{trace_id}-{span_id}-01")
    version, got_trace, got_span, flags = child.split("-")
    assert (version, got_trace, flags) == ("00", trace_id, "01")
    assert got_span != span_id and len(got_span) == 16
    # No parent, or one that is not W3C: a new trace rather than a malformed header.
    for parent in (None, "", "garbage", f"00-{trace_id}-{span_id}"):
        assert len(child_traceparent(parent).split("-")[1]) == 32


_HEADER_VALUES = st.binary(max_size=8) | st.text(max_size=8) | st.none()


@given(st.lists(st.tuples(st.text(max_size=8), _HEADER_VALUES), max_size=5), st.booleans())
def test_headers_as_any_client_hands_them_over_become_str_and_bytes_pairs(
    pairs: list[tuple[str, Any]], as_dict: bool
) -> None:
    raw: Any = dict(pairs) if as_dict else pairs
    items = raw.items() if as_dict else pairs
    want = tuple((k, v.encode() if isinstance(v, str) else v or b"") for k, v in items)
    assert header_pairs(raw) == want  # a list of bytes values too, which is kept as it is
    assert header_pairs(None) == header_pairs([]) == ()


def test_the_outputs_of_one_hop_carry_its_span_and_ids_of_their_own() -> None:
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    parent = (headers.TRACEPARENT, f"00-{trace_id}-{span_id}-01".encode())
    origin = _origin((headers.EVENT_ID, b"e1"), parent)
    outs = [next_record("t", "doc-1", _result(), origin, step) for step in ("a", "b")]
    spans = {out.header(headers.TRACEPARENT) for out in outs}
    assert len(spans) == 1  # one hop, one span: the parent's trace, a span of its own
    (span,) = spans
    assert span is not None and span.split("-")[1] == trace_id and span_id not in span
    assert len({out.header(headers.EVENT_ID) for out in outs}) == 2
    # The same record read again (a redelivery) yields the same ids, a span of its own.
    again = _origin((headers.EVENT_ID, b"e1"), parent)
    redone = next_record("t", "doc-1", _result(), again, "a")
    assert redone.header(headers.EVENT_ID) == outs[0].header(headers.EVENT_ID)
    assert redone.header(headers.TRACEPARENT) != span


def test_event_ids_derive_from_the_input_and_the_step() -> None:
    origin = _origin((headers.EVENT_ID, b"e1"))
    assert derived_event_id(origin, "route") == derived_event_id(origin, "route")
    assert derived_event_id(origin, "route") != derived_event_id(origin, "page1")
    assert derived_event_id(origin, "route") != derived_event_id(
        _origin((headers.EVENT_ID, b"e2")), "route"
    )
    # Without an input id the record's coordinates stand in for it.
    assert derived_event_id(_origin(), "x") == derived_event_id(_origin(), "x")


def test_event_ids_are_the_uuid5_they_always_were() -> None:
    # The fast uuid5 must give the very ids the standard library gives: a record redone
    # by a newer build still yields the ids its first run wrote.
    for name in ("", "e1:route", "docs.oriented/3/17:deliver", "é" * 300, "a:b:c" * 40):
        assert uuid5(name) == str(uuid.uuid5(EVENT_ID_NAMESPACE, name))
    assert derived_event_id(_origin((headers.EVENT_ID, b"e1")), "route") == str(
        uuid.uuid5(EVENT_ID_NAMESPACE, "e1:route")
    )


def test_next_record_carries_the_standard_headers() -> None:
    page_origin = _origin((headers.EVENT_ID, b"e1"))
    out = next_record("docs.results", "doc-1", _result(), page_origin, "deliver")
    assert out.key == b"doc-1"
    assert out.header(headers.SCHEMA) == "DocumentResult/1"
    assert out.header(headers.EVENT_ID) == derived_event_id(page_origin, "deliver")
    assert out.header(headers.TRACEPARENT) is not None
    first = first_record("docs.raw", "doc-1", _result())
    assert first.header(headers.EVENT_ID) != first_record("docs.raw", "doc-1", _result()).header(
        headers.EVENT_ID
    )


def test_a_dead_letter_too_large_for_a_record_drops_its_value_and_says_so() -> None:
    origin = _origin((headers.EVENT_ID, b"e1"), value=b"x" * 50_000)
    kept = dead_letter(origin, dlq_topic="docs.dlq", stage="ingest", group="g", exc=ValueError("v"))
    assert kept.value == origin.value and kept.header(headers.VALUE_DROPPED) is None
    dropped = dead_letter(
        origin, dlq_topic="docs.dlq", stage="ingest", group="g", exc=ValueError("v"),
        max_bytes=20_000,
    )  # fmt: skip
    assert dropped.value is None and dropped.key == origin.key
    assert dropped.header(headers.VALUE_DROPPED) == "50000"
    assert dropped.header(headers.ERROR_EXCEPTION_MESSAGE) == "v"
    assert dropped.size_bytes <= 20_000


def test_a_dead_letter_of_a_record_with_huge_headers_or_key_still_fits() -> None:
    # Before: the letter copied every header of its record, so ~1 MB of headers made a
    # dead letter that never fit, and its send was retried forever.
    big_headers = [(f"h{n}", b"y" * 10_000) for n in range(100)]  # ~1 MB
    origin = _origin((headers.EVENT_ID, b"e1"), *big_headers, value=b"x" * 10)
    letter = dead_letter(origin, dlq_topic="docs.dlq", stage="route", group="g",
                         exc=ValueError("v"), max_bytes=1_000_000)  # fmt: skip
    assert letter.fits(1_000_000) and letter.key == origin.key
    assert letter.header(headers.VALUE_DROPPED) == "10"
    assert int(letter.header(headers.HEADERS_DROPPED) or 0) > 1_000_000
    assert letter.header("h1") is None and letter.header(headers.EVENT_ID) is None
    for name in headers.ERROR_HEADERS:  # the reason and the coordinates always travel
        assert letter.header(name) is not None, name
    huge_key = _origin(value=b"x", key=b"k" * 1_100_000)
    letter = dead_letter(huge_key, dlq_topic="docs.dlq", stage="route", group="g",
                         exc=ValueError("v"), max_bytes=1_000_000)  # fmt: skip
    assert letter.fits(1_000_000) and letter.key is None
    assert letter.header(headers.KEY_DROPPED) == "1100000"


def test_a_dead_letter_fits_the_smallest_limit_whatever_its_error_says() -> None:
    # Capped in characters, a CJK message and stack trace made a letter of 36 KB with
    # nothing left to drop: over a 10,000-byte limit, refused and refused again.
    def deep(n: int) -> None:
        if n == 0:
            raise ValueError("文書の検証に失敗しました" * 200)
        deep(n - 1)

    try:
        deep(60)
    except ValueError as exc:
        error = exc
    letter = dead_letter(_origin(value=b"x" * 5_000, key=b"k" * 3_000), dlq_topic="docs.dlq",
                         stage="route", group="g", exc=error, max_bytes=10_000)  # fmt: skip
    assert letter.fits(10_000)
    assert len((letter.header(headers.ERROR_EXCEPTION_MESSAGE) or "").encode()) <= 1_000
    # What is kept of the trace is its end: the frame that raised.
    assert "deep" in (letter.header(headers.ERROR_EXCEPTION_STACKTRACE) or "")
    for name in headers.ERROR_HEADERS:
        assert letter.header(name) is not None, name


def _result() -> DocumentResult:
    return DocumentResult(
        doc_id="doc-1", operation=Operation.classify, status="failed", page_count=0,
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        completed_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip
