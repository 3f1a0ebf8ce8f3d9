"""route: a page back from a GPU stage -> its next work topic or docs.pages.done (next_step)."""

from __future__ import annotations

import logging

from schemas import PageState, RecordError, decode
from streams.client import progress
from streams.kafka.envelope import Origin, Outgoing, dead_letter, next_record
from streams.routing import RoutingError, next_step
from streams.topics import DLQ, Topology

log = logging.getLogger(__name__)

STAGE = "route"


class Router:
    def __init__(
        self, topology: Topology, *, group: str, min_confidence: float, progress: bool = False
    ) -> None:
        self.topology = topology
        self.group = group
        self.min_confidence = min_confidence
        self.progress = progress  # also write docs.progress (streams/client/progress.py)

    def handle(self, origin: Origin) -> list[Outgoing]:
        try:
            page = decode(PageState, origin.value)
            route = next_step(page, min_confidence=self.min_confidence)
        except (RecordError, RoutingError) as exc:
            log.warning("route: dead letter %s[%d]@%d %s", origin.topic, origin.partition,
                        origin.offset, type(exc).__name__)  # fmt: skip
            dlq = self.topology.name(DLQ)
            return [dead_letter(origin, dlq_topic=dlq, stage=STAGE, group=self.group, exc=exc)]
        topic = self.topology.name(route.topic)
        out = [next_record(topic, page.doc_id, page, origin, STAGE)]
        if self.progress:
            out += progress.page_moved(self.topology, page, topic, origin)
        return out
