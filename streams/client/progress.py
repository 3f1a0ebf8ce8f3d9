"""docs.progress: where each page of a document is, for `pagestream status DOC_ID`.

The agents write one small record each time a page moves (ingest and route: the work
topic it now waits in; deliver: done, and the document ended). Keys are
`doc_id/page_no` (`doc_id` for the document, "/" is not allowed in a doc_id) and every
key of a document goes to the partition of its doc_id, so the topic, compacted, holds
the latest place of every page, and one partition answers for a document.

This module is that layout, shared by the writer (streams/agents/progress.py) and the
reader (streams/client/status.py); the record itself is schemas.Progress.
"""

from __future__ import annotations

from functools import lru_cache

from streams.kafka.partitioning import partition_for
from streams.topics import PROGRESS


def record_key(doc_id: str, page_no: int | None) -> str:
    """The key of a page's record (`doc_id/page_no`), or of the document's (`doc_id`)."""
    return doc_id if page_no is None else f"{doc_id}/{page_no}"


def is_key_of(key: bytes, doc_id: str) -> bool:
    """Whether a record's key is the document's or one of its pages'."""
    return key == doc_id.encode() or key.startswith(f"{doc_id}/".encode())


@lru_cache(maxsize=4096)  # murmur2 in Python: a document's pages ask again and again
def partition_of(doc_id: str) -> int:
    """The docs.progress partition that holds every record of `doc_id`."""
    return partition_for(doc_id.encode(), PROGRESS.partitions)
