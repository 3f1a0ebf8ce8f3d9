"""The HTTP API's request and answer bodies besides the records of `schemas/` (which it
uses as they are: Options, Operation, Payload, DocumentResult): what the OpenAPI spec
names. Submissions and documents first, then the caller and the operator's views."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, HttpUrl

from schemas import Attributes, DocumentResult, Operation, Options, Payload


class JsonSubmission(BaseModel):
    """POST /v1/documents with `Content-Type: application/json`: a document small enough
    to send inline (`payload.inline_base64`), or already in the gateway's blob store,
    named by its content (`payload.uri` equal to the store's address of `payload.sha256`)."""

    model_config = {"extra": "forbid"}

    operation: Operation = Operation.process
    options: Options = Field(default_factory=Options)
    payload: Payload
    callback: HttpUrl | None = None
    attributes: Attributes = Field(default_factory=dict)


class Accepted(BaseModel):
    doc_id: str
    status_url: str
    # True when an earlier request with the same Idempotency-Key submitted it.
    replayed: bool = False


class StageWait(BaseModel):
    stage: str  # orient, classify, extract, ocr, aggregate, done
    pages: int
    waiting_s: float  # how long the oldest of those pages has been there


class DocumentStatus(BaseModel):
    doc_id: str
    state: Literal["submitted", "running", "ended"]
    pages_total: int  # 0 until ingest has split the document
    pages_done: int
    stages: list[StageWait] = Field(default_factory=list)
    submitted_at: float | None = None  # epoch seconds
    # Once ended: the DocumentResult, its claim-checked parts fetched.
    result: DocumentResult | None = None


class Problem(BaseModel):
    """Every error answer: the status and one line naming the problem."""

    status: int
    detail: str


# The two bodies POST /v1/documents and POST /v1/process take, for the spec: their handler
# reads the stream itself (after the key), so FastAPI cannot see a model.
SUBMIT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "operation": {
                            "type": "string",
                            "enum": [o.value for o in Operation],
                        },
                        "callback": {"type": "string", "format": "uri"},
                        **{
                            name: {"type": "string", "description": f"Options.{name}"}
                            for name in Options.model_fields
                        },
                    },
                }
            },
            "application/json": {"schema": {"$ref": "#/components/schemas/JsonSubmission"}},
        },
    }
}


class DocumentSummary(BaseModel):
    doc_id: str
    state: str  # submitted, running, ended
    status: str | None  # completed, partial, failed once ended
    pages_total: int
    pages_done: int | None
    updated_at: float  # epoch seconds


class Me(BaseModel):
    key_id: str
    tenant: str
    role: str


class TopicLag(BaseModel):
    topic: str
    partitions: int
    lag_records: int  # lag in records (markers excluded), as `pagestream lag` counts it


class GroupLagView(BaseModel):
    group: str
    state: str
    members: int
    lag_records: int
    topics: list[TopicLag]


class DeadLetterView(BaseModel):
    id: str  # "partition:offset" on docs.dlq: what a replay selects
    doc_id: str | None
    topic: str | None  # where it failed, and where a replay sends it back
    stage: str | None
    exception: str | None
    message: str | None  # the error's one line, which never holds document content
    failed_at: datetime | None
    replays: int


class ReplayRequest(BaseModel):
    model_config = {"extra": "forbid"}

    ids: list[str] = Field(min_length=1, max_length=1000)


class ReplayAnswer(BaseModel):
    replayed: int
    refused: int  # replayed too often already, or its value was not kept
    deferred: int  # still pending: the replay group's record is full; replay them again
    not_pending: int  # handled earlier, or not a dead letter
