"""route: a page back from a GPU stage -> its next work topic or docs.pages.done (next_step).

A page that does not parse, or has no next step, raises (RecordError, RoutingError):
the record's fault, which RecordHandling (streams/agents/failure_policy.py) dead-letters.
"""

from __future__ import annotations

from schemas import PageState, decode
from streams.agents import progress
from streams.kafka.envelope import Origin, Outgoing, next_record
from streams.routing import next_step
from streams.topics import Topology

STAGE = "route"


class Router:
    def __init__(
        self, topology: Topology, *, min_confidence: float, progress: bool = False
    ) -> None:
        self.topology = topology
        self.min_confidence = min_confidence
        self.progress = progress  # also write docs.progress (streams/agents/progress.py)

    def handle(self, origin: Origin) -> list[Outgoing]:
        page = decode(PageState, origin.value)
        route = next_step(page, min_confidence=self.min_confidence)
        topic = self.topology.name(route.topic)
        out = [next_record(topic, page.doc_id, page, origin, STAGE)]
        if self.progress:
            out += progress.page_moved(self.topology, page, topic, origin)
        return out
