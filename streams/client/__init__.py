"""The client side of the pipeline: submit documents, read their results and progress.

intake    the one way onto docs.raw: a submission's record, its envelope and the record
          limit, for `pagestream submit` and the gateway's POST /v1/documents alike
submit    publish files to docs.raw (inline or through the blob store), through intake
results   read the latest DocumentResult per document from docs.results
status    read where a document's pages are from docs.progress (`pagestream status`)
progress  docs.progress's keys and partitions, shared with the agents that write
          it (streams/agents/progress.py)
"""

from __future__ import annotations

from streams.client import progress
from streams.client.intake import Intake, RecordTooLargeError
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
    "Intake",
    "RecordTooLargeError",
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
