"""Dead letters: the original record plus headers saying where it came from and why it failed.

Shared by the GPU node and the CPU agents so every docs.dlq record carries the
same facts (the ones Kafka Connect's `__connect.errors.*` headers carry). The
original key and value bytes are kept untouched so `pagestream dlq replay` can
put the record back exactly as it was.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from datetime import UTC, datetime

from schemas import headers
from schemas.errors import RecordError

# Stack traces can be long; the DLQ record must stay far below the 1 MiB limit.
_MAX_STACKTRACE_CHARS = 8_000
_MAX_MESSAGE_CHARS = 1_000

Header = tuple[str, bytes]


@dataclass(frozen=True)
class Origin:
    """Where the failed record was read from."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def error_message(exc: BaseException) -> str:
    """One line naming the problem; never the record's content.

    RecordError messages are already safe (schemas.codec makes sure); for other
    exceptions the caller must not put document data into the message.
    """
    text = exc.reason if isinstance(exc, RecordError) else str(exc)
    text = " ".join(text.split()) or type(exc).__name__
    return text[:_MAX_MESSAGE_CHARS]


def dead_letter_headers(
    origin: Origin,
    *,
    stage: str,
    group: str,
    exc: BaseException,
    attempts: int = 1,
    now: datetime | None = None,
) -> list[Header]:
    """The original headers (minus stale error headers) plus the pagestream.error.* set."""
    stack = "".join(traceback.format_exception(exc))[-_MAX_STACKTRACE_CHARS:]
    failed_at = (now or datetime.now(UTC)).isoformat()
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
    return kept + [(k, v.encode()) for k, v in error]
