"""route: a page back from a GPU stage -> its next work topic or docs.pages.done (next_step).

A page that does not parse, or has no next step, raises (RecordError, RoutingError):
the record's fault, which the loop (streams/agents/batches.py) dead-letters.

route changes nothing in a page: it goes on as the bytes it came in, once they have
validated, when they were written under the current schema (the GPU node writes them
with schemas.codec.encode: every field, defaults included). Encoding the page again was
a third of a route record's CPU (docs/benchmarks.md). A page of an older schema version
is written again in the current one.
"""

from __future__ import annotations

from schemas import PageState, decode, headers
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
        current = origin.header(headers.SCHEMA) == headers.schema_header(PageState)
        out = [next_record(topic, page.doc_id, page, origin, STAGE,
                           value=origin.value if current else None)]  # fmt: skip
        if self.progress:
            out += progress.page_moved(self.topology, page, topic, origin)
        return out
