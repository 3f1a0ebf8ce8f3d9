"""dlq replay's progress per partition, and which client errors it asks again about."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streams.admin.dlq.letters import _retriable
from streams.admin.dlq.progress import Progress


def test_progress_round_trips_through_the_commit_metadata() -> None:
    progress = Progress(5, {6, 7, 8, 10, 12, 13})
    tp = TopicPartition("t", 0, progress.position, metadata=progress.metadata())
    assert tp.metadata == "6-8,10,12-13"
    assert Progress.committed(tp) == progress
    # Nothing committed yet: from the beginning, nothing sent.
    assert Progress.committed(TopicPartition("t", 0)).sent == set()


def test_progress_moves_to_the_first_dead_letter_not_sent_back() -> None:
    progress = Progress(5, {7, 9})
    progress.advance(first_unsent=8, read_up_to=12)
    assert (progress.position, progress.sent) == (8, {9})
    progress.advance(first_unsent=None, read_up_to=12)  # a later run sent them all
    assert (progress.position, progress.sent) == (12, set())


def test_a_partition_between_leaders_is_asked_again() -> None:
    # get_watermark_offsets raises errors without librdkafka's retriable flag: by code.
    assert _retriable(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))
    assert not _retriable(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    assert not _retriable(ValueError("x"))


def test_a_letter_is_sent_back_only_if_its_offset_can_be_recorded() -> None:
    # Skipped and sent letters interleaved (every other one matches the filter): each
    # sent one is a run of its own in the commit's metadata, which the broker caps.
    # Past the cap a letter is deferred, never sent unrecorded: an unrecorded one was
    # sent again by every later run.
    progress = Progress(0, set())
    recorded = [o for o in range(1, 4_000, 2) if progress.record(o)]
    assert 0 < len(recorded) < 2_000
    metadata = progress.metadata()
    assert len(metadata) <= 3_500
    assert Progress.committed(TopicPartition("t", 0, 0, metadata=metadata)).sent == set(recorded)
    # A run that sends the skipped ones moves the position on and makes room again.
    progress.advance(first_unsent=None, read_up_to=4_000)
    assert progress.record(4_001)
