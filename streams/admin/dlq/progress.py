"""A replay group's progress on docs.dlq, kept in its commits, and the dead letters it
has not handled yet.

What "already replayed" means: a dead letter is replayed once by the replay group,
whatever filters the runs use. The group's committed offset on a partition is the
first dead letter it has not sent back and may still send (one a filter skipped, or
one whose kept value the blob store could not give), and the commit's metadata lists
the offsets after it that were sent back (`Progress`). So a run with a filter never
passes over the dead letters it skipped, a later run finds them, and nothing is sent
back twice. A letter refused for good (replayed `max_replays` times, its value, key or
headers not kept, over the record limit) is passed over like one sent: to send those
again, replay with a new `--group`. Past the metadata's room (many skipped and sent
letters interleaved), letters are deferred to a later run, never sent unrecorded.
Progress is committed after each batch the broker acknowledged: an interrupted replay
resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from streams.admin.dlq.letters import DeadLetter, Filter, partitions, read
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DLQ

_METADATA_CHARS = 3_500  # of the commit's metadata (brokers keep 4,096 by default)


@dataclass
class Progress:
    """A replay group on one partition: `position`, the first dead letter it has not
    sent back, and `sent`, the offsets after it that it has (kept in the commit's
    metadata as ranges, e.g. "3-7,9")."""

    position: int
    sent: set[int]
    # Characters the metadata takes, counted as offsets are recorded (sorting the set
    # for every letter would cost a replay of many letters dearly).
    _chars: int = 0

    def __post_init__(self) -> None:
        self._chars = len(self.metadata())

    def record(self, offset: int) -> bool:
        """Records `offset` as sent back, if the commit's metadata has room for it; False
        (not recorded) if it has not: the letter must not be sent, or later runs would
        send it again, run after run."""
        # A run of its own ("o,") or a run's end rewritten: never more than this.
        grows = len(str(offset)) + 1
        if self._chars + grows > _METADATA_CHARS:
            return False
        self._chars += grows
        self.sent.add(offset)
        return True

    @classmethod
    def committed(cls, tp: TopicPartition) -> Progress:
        sent: set[int] = set()
        for part in (tp.metadata or "").split(","):
            first, _, last = part.partition("-")
            if first.isdigit() and (not last or last.isdigit()):
                sent.update(range(int(first), int(last or first) + 1))
        return cls(tp.offset, sent)  # negative: nothing committed, from the beginning

    def advance(self, first_unsent: int | None, read_up_to: int) -> None:
        """After a run that read up to `read_up_to` (exclusive) and left `first_unsent`
        (or nothing) behind."""
        self.position = read_up_to if first_unsent is None else first_unsent
        self.sent = {o for o in self.sent if o >= self.position}
        self._chars = len(self.metadata())

    def metadata(self) -> str:
        """The sent offsets as ranges (`record` keeps them within the broker's limit)."""
        return ",".join(
            str(first) if first == last else f"{first}-{last}"
            for first, last in _runs(sorted(self.sent))
        )


def _runs(offsets: list[int]) -> Iterator[tuple[int, int]]:
    start = prev = None
    for o in offsets:
        if prev is not None and o == prev + 1:
            prev = o
            continue
        if start is not None and prev is not None:
            yield start, prev
        start = prev = o
    if start is not None and prev is not None:
        yield start, prev


def pending_dead(
    settings: Settings, flt: Filter, group: str | None = None, limit: int | None = None
) -> list[DeadLetter]:
    """The dead letters the replay group has not handled yet (neither sent back nor
    refused for good), oldest first, at most `limit`: what an operator still has to look
    at. Commits nothing."""
    topic = settings.topology.name(DLQ)
    group = settings.dlq_replay_group if group is None else settings.topology.own(group)
    consumer = kafka.consumer(settings.kafka, group, **{"enable.auto.commit": False})
    found: list[DeadLetter] = []
    try:
        committed = consumer.committed(partitions(consumer, topic), timeout=10)
        progress = {tp.partition: Progress.committed(tp) for tp in committed}
        starts = [TopicPartition(topic, p, pr.position) for p, pr in progress.items()]
        for dead in read(consumer, topic, starts):
            if dead.offset not in progress[dead.partition].sent and flt.matches(dead):
                found.append(dead)
                if limit is not None and len(found) >= limit:
                    break
    finally:
        consumer.close()
    return found
