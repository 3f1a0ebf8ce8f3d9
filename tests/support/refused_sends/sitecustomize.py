"""Loaded by a worker started with this folder on PYTHONPATH (Python imports
`sitecustomize` at start-up): while the file PAGESTREAM_TEST_REFUSE_FLAG exists, every
record the worker's producer sends to a topic ending in PAGESTREAM_TEST_REFUSE_TOPIC
fails as the broker fails it when it cannot take it (NOT_ENOUGH_REPLICAS, a retriable
KafkaError), on its acknowledgement. The broker is real; only its answer is made up, for
one topic, because a single-node broker has no way to refuse one topic alone."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from aiokafka.errors import NotEnoughReplicasError
from aiokafka.producer.producer import AIOKafkaProducer

_FLAG = Path(os.environ["PAGESTREAM_TEST_REFUSE_FLAG"])
_SUFFIX = os.environ["PAGESTREAM_TEST_REFUSE_TOPIC"]
_send = AIOKafkaProducer.send


async def _refusing_send(self: AIOKafkaProducer, topic: str, *args: Any, **kwargs: Any) -> Any:
    if not topic.endswith(_SUFFIX) or not _FLAG.exists():
        return await _send(self, topic, *args, **kwargs)
    failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    failed.set_exception(NotEnoughReplicasError(f"{topic}: refused by the test"))
    return failed


AIOKafkaProducer.send = _refusing_send  # type: ignore[method-assign]
