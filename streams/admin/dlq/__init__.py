"""Dead letters: list, show and replay the records in docs.dlq.

    letters   DeadLetter (a record of docs.dlq and the facts its headers carry), Filter,
              and reading docs.dlq up to its end: list_dead
    progress  what a replay group has sent back already, kept in its commits; which
              letters it has not handled yet: pending_dead
    replay    send dead letters back to the topic they failed on: replay

Replay puts a record back on the topic it failed on (the `pagestream.error.topic`
header) with its original key, value and headers, plus a replay count; a record
already replayed `max_replays` times is refused, so a poison record cannot loop
forever. Listing never commits. Nothing here prints record values: they are
documents and may hold personal data.
"""

from __future__ import annotations

from streams.admin.dlq.letters import DeadLetter, Filter, list_dead
from streams.admin.dlq.progress import pending_dead
from streams.admin.dlq.replay import ReplayReport, ReplayTakenOver, replay

__all__ = [
    "DeadLetter",
    "Filter",
    "ReplayReport",
    "ReplayTakenOver",
    "list_dead",
    "pending_dead",
    "replay",
]
