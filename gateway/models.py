"""What the HTTP API answers and takes besides the records of `schemas/` (which it uses
as they are: Options, Operation, Payload, DocumentResult), for the OpenAPI spec."""

from __future__ import annotations

from typing import Literal

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
