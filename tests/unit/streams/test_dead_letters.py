"""Dead-letter headers: every pagestream.error.* fact, the original record untouched."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import RecordError, headers
from streams.dead_letters import Origin, dead_letter_headers, error_message


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
        got = dead_letter_headers(
            origin, stage="classify", group="pagestream-gpu", exc=exc, attempts=2,
            now=datetime(2026, 1, 1, tzinfo=UTC),
        )  # fmt: skip
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
