"""Dead letters: built, logged and counted once."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from schemas import headers
from schemas.errors import RecordError
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing
from streams.telemetry.metrics import dead_letters_counter

ORIGIN = Origin("t.docs.raw", 2, 7, 1_700_000_000_000, b"k", b"the document's bytes",
                ((headers.EVENT_ID, b"evt-1"),))  # fmt: skip


def _dead_letters(registry: CollectorRegistry, max_record_bytes: int = 100_000) -> DeadLetters:
    return DeadLetters("t.docs.dlq", group="g", max_record_bytes=max_record_bytes,
                       counter=dead_letters_counter(registry))  # fmt: skip


def _count(registry: CollectorRegistry, stage: str, reason: str) -> float | None:
    labels = {"stage": stage, "reason": reason}
    return registry.get_sample_value("pagestream_dead_letters_total", labels)


def test_a_dead_letter_is_logged_without_its_content_and_counted_once_when_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    dead_letters = _dead_letters(registry)
    with caplog.at_level(logging.WARNING, logger="streams.kafka.dead_letters"):
        letter = dead_letters.letter("ingest", ORIGIN, RecordError("payload: not base64"))
    (record,) = caplog.records
    assert record.getMessage() == "ingest: dead letter t.docs.raw[2]@7 RecordError"
    assert b"document" not in record.getMessage().encode()
    assert (letter.topic, letter.key, letter.value) == ("t.docs.dlq", b"k", ORIGIN.value)
    assert letter.header(headers.ERROR_STAGE) == "ingest"
    assert letter.header(headers.ERROR_GROUP) == "g"
    assert letter.header(headers.ERROR_EXCEPTION_CLASS) == "schemas.errors.RecordError"
    assert _count(registry, "ingest", "RecordError") is None  # built, not yet written
    other = Outgoing("t.docs.results", b"k", b"{}")
    assert dead_letters.sent([letter, other]) == 1
    assert _count(registry, "ingest", "RecordError") == 1


def test_an_output_over_the_record_limit_makes_the_record_a_dead_letter() -> None:
    dead_letters = _dead_letters(CollectorRegistry(), max_record_bytes=4_096)
    small = Outgoing("t.gpu.orient", b"k", b"x" * 10)
    big = Outgoing("t.gpu.orient", b"k", b"x" * 10_000)
    assert dead_letters.fit("ingest", ORIGIN, [small]) == [small]
    (letter,) = dead_letters.fit("ingest", ORIGIN, [small, big])
    assert letter.topic == "t.docs.dlq"
    assert (letter.header(headers.ERROR_EXCEPTION_CLASS) or "").endswith(".OutputTooLargeError")


def test_a_dead_letter_too_large_for_a_record_travels_without_its_value() -> None:
    dead_letters = _dead_letters(CollectorRegistry(), max_record_bytes=20_000)
    huge = Origin("t.docs.raw", 0, 1, None, b"k", b"x" * 30_000)
    letter = dead_letters.letter("ingest", huge, RecordError("too big"))
    assert letter.value is None and letter.header(headers.VALUE_DROPPED) == "30000"
    assert dead_letters.letter("ingest", ORIGIN, RecordError("r"), without_value=True).value is None


def test_a_value_too_large_for_its_dead_letter_is_kept_in_the_blob_store(tmp_path) -> None:
    # Before: the value was dropped, and the dead letter could never be replayed.
    from streams.blobs import BlobStore

    blobs = BlobStore(str(tmp_path / "blobs"))
    dead_letters = DeadLetters("t.docs.dlq", group="g", max_record_bytes=20_000, blobs=blobs)
    huge = Origin("t.docs.raw", 0, 1, None, b"k", b"x" * 30_000, (("h", b"v"),))
    letter = dead_letters.letter("ingest", huge, RecordError("too big"))
    assert letter.value is None and letter.header(headers.VALUE_DROPPED) == "30000"
    assert blobs.get(letter.header(headers.VALUE_REF) or "") == huge.value
    # Refused by the broker (its limit is below ours): the value goes aside whatever its
    # size, and the letter keeps its key and the record's own headers.
    refused = dead_letters.letter("ingest", ORIGIN, RecordError("r"), without_value=True)
    assert refused.value is None and refused.key == ORIGIN.key
    assert blobs.get(refused.header(headers.VALUE_REF) or "") == ORIGIN.value
    assert [k for k, _ in refused.headers if not k.startswith("pagestream.error.")] == [
        k for k, _ in ORIGIN.headers
    ]
