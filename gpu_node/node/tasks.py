"""One consumed page task: its record, its slot in the offset order, its image."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from gpu_node.node.inputs import PageImage
from gpu_node.node.ordering import Slot
from schemas import PageState, Stage
from streams.kafka.envelope import Origin


@dataclass(eq=False)
class Task:
    stage: Stage
    slot: Slot
    origin: Origin
    page: PageState
    image: Future[PageImage] | None = None  # fetch + decode (inputs.py), started when consumed
    attempts: int = 1
    not_before: float = 0.0  # monotonic time before which an engine retry must wait
    # Sent to its engine on its own: the chunk it was in failed, and it is retried
    # apart so that one bad page cannot fail the others.
    alone: bool = False
    consumed_ns: int = field(default_factory=time.time_ns)  # start of its trace span
    batch_size: int = 1  # of the model call that answered it
    model_s: float = 0.0  # wall time of that call (its whole batch)

    @property
    def dropped(self) -> bool:
        return self.slot.dropped


def document_type(page: PageState) -> Any:
    """The type to extract: the client's claim wins over the classifier's guess (it
    knows what it sent)."""
    if page.options.document_type is not None:
        return page.options.document_type
    return page.classification.document_type if page.classification else None
