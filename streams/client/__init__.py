"""The client side of the pipeline: submit documents, read their results and progress.

submit    publish files to docs.raw (inline or through the blob store)
results   read the latest DocumentResult per document from docs.results
status    read where a document's pages are from docs.progress (`pagestream status`)
progress  docs.progress's keys and partitions, shared with the agents that write
          it (streams/agents/progress.py)
"""

from __future__ import annotations

from streams.client import progress
from streams.client.results import (
    ResultsReader,
    ResultsUnavailableError,
    resolved,
    write_markdown,
)
from streams.client.status import DocumentProgress, read_progress
from streams.client.submit import (
    Submission,
    SubmitError,
    Submitter,
    discover,
    stable_doc_id,
    submit_paths,
)

__all__ = [
    "DocumentProgress",
    "ResultsReader",
    "ResultsUnavailableError",
    "Submission",
    "SubmitError",
    "Submitter",
    "discover",
    "progress",
    "read_progress",
    "resolved",
    "stable_doc_id",
    "submit_paths",
    "write_markdown",
]
