"""The one way onto docs.raw, for `pagestream submit` (submit.py) and the gateway's
`POST /v1/documents` alike.

A submission becomes a record here: its DocumentSubmitted fields laid out (`fields`; each
front door validates them, to word a refusal its own way), then the record wrapped in the
envelope that starts its trace (a child span of the HTTP request's, when there is one),
keyed by its doc_id and measured against the record limit before any producer is asked to
take it (`outgoing`; the one gate, streams/kafka/sizes.py). How the record then travels
is the caller's: the Submitter produces many and flushes once; the gateway awaits each
acknowledgement before it answers 202.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import HttpUrl

from schemas import DocumentSubmitted, Operation, Options, Payload
from streams.kafka.envelope import Outgoing, first_record
from streams.settings import Settings
from streams.topics import RAW, Topology


class RecordTooLargeError(ValueError):
    """The submission's record is over the record limit: its attributes, mostly, since a
    payload over the inline limit travels as a claim check."""

    def __init__(self, doc_id: str, size_bytes: int, limit: int) -> None:
        super().__init__(
            f"the submission of {doc_id} is a {size_bytes}-byte record, over the record "
            f"limit of {limit} (PAGESTREAM_KAFKA__MAX_RECORD_BYTES): shorten its attributes"
        )
        self.doc_id, self.size_bytes, self.limit = doc_id, size_bytes, limit


class Intake:
    """Builds the records of docs.raw for one topology; holds no client."""

    def __init__(self, settings: Settings, topology: Topology | None = None) -> None:
        self.topic = (topology or settings.topology).name(RAW)
        self.max_record_bytes = settings.kafka.max_record_bytes

    @staticmethod
    def fields(
        doc_id: str,
        payload: Payload | Mapping[str, Any],
        *,
        operation: Operation | str = Operation.process,
        options: Options | Mapping[str, Any] | None = None,
        callback: HttpUrl | str | None = None,
        attributes: Mapping[str, str | int | float | bool | None] | None = None,
        tenant: str | None = None,
    ) -> dict[str, Any]:
        """A DocumentSubmitted's fields, laid out once for both front doors. Each checks
        them itself, to explain a refusal in its own words: `pagestream submit` with
        `schemas.validate` (a RecordError), the gateway with pydantic's lines (a 422)."""
        return {
            "doc_id": doc_id,
            "operation": operation,
            "options": options if options is not None else Options(),
            "payload": payload,
            "callback": callback,
            "attributes": attributes if attributes is not None else {},
            "tenant": tenant,
        }

    def outgoing(self, record: DocumentSubmitted, *, parent: str | None = None) -> Outgoing:
        """`record` as docs.raw carries it; `parent` is the submitting request's W3C
        traceparent. Raises RecordTooLargeError over the record limit."""
        if record.doc_id is None:  # ingest would name it, but a client must know its id
            raise ValueError("a submission to docs.raw names its doc_id")
        out = first_record(self.topic, record.doc_id, record, parent=parent)
        if not out.fits(self.max_record_bytes):
            raise RecordTooLargeError(record.doc_id, out.size_bytes, self.max_record_bytes)
        return out
