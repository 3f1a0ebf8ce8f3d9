"""The failure policy of one engine batch, shared by every engine (vllm, openai) and by
VLM page reading (gpu_node/dococr/transcribe.py).

The pages of a batch are sent at once and awaited together. When some fail, the
engine's own trouble ranks first: an `EngineUnavailable` (or a cancellation) raises,
so the node keeps the whole batch and retries it later instead of splitting it up and
dead-lettering it page by page. Otherwise the first page failure raises, and the node
isolates the page that caused it by retrying the pages one by one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Iterable
from typing import TypeVar, cast

from gpu_node.extraction.base import EngineUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")


async def gather_batch(calls: Iterable[Awaitable[T]], *, label: str) -> list[T]:
    """Every call's result, in order; raises the batch's worst failure (see above).
    `label` names the batch in the debug log line."""
    started = time.monotonic()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    log.debug(
        "%s: %d pages in %.2f s, %d failed",
        label,
        len(outcomes),
        time.monotonic() - started,
        len(failures),
    )
    for exc in failures:
        if isinstance(exc, EngineUnavailable) or not isinstance(exc, Exception):
            raise exc
    if failures:
        raise failures[0]
    return cast(list[T], outcomes)
