"""One consumer group taking partitions over from another: route's group from the faust
app's, whose route agent consumed the facts topics until 2026-12.

On a partition it never committed, the new group starts where the old one left it, not
at the earliest record (it would do again all the work the topics' retention still
holds), and commits there at once (BatchLoop), so the partition never reads as lag from
its log start. The old group's offsets on those topics stay behind, and as the topics
grow they read as the old group's lag until Kafka expires them (offsets.retention.minutes,
7 days by default). Neither Python client can delete another group's offsets (Kafka's
OffsetDelete); the upgrade notes in docs/operations.md give Kafka's own command.
"""

from __future__ import annotations

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

_TIMEOUT_S = 15.0


class Takeover:
    def __init__(self, admin: AdminClient, group: str) -> None:
        self._admin = admin
        self.group = group
        # Where the old group left every partition it committed, read once: it no longer
        # moves. Asked on every rebalance, the cluster kept one worker's assignment
        # callback (and so its group's rebalance) waiting a minute at a time after a
        # broker restart (the chaos test, 2026-12-07).
        self._left: dict[tuple[str, int], int] | None = None

    def starts(self, partitions: list[TopicPartition]) -> dict[tuple[str, int], int]:
        """Where the old group stands on each partition asked about (those it committed)."""
        if self._left is None:
            request = ConsumerGroupTopicPartitions(self.group)  # every partition it has
            futures = self._admin.list_consumer_group_offsets([request], request_timeout=_TIMEOUT_S)
            result = futures[self.group].result()
            self._left = {(tp.topic, tp.partition): tp.offset
                          for tp in result.topic_partitions or [] if tp.offset >= 0}  # fmt: skip
        asked = [(tp.topic, tp.partition) for tp in partitions]
        return {tp: self._left[tp] for tp in asked if tp in self._left}
