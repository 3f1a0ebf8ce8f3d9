"""`WebhookDelivery`: one webhook POST to make, on `docs.webhooks` (keyed by doc_id)."""

from __future__ import annotations

from pydantic import Field

from schemas.common import DocId, Record
from schemas.results import DocumentResult


class WebhookDelivery(Record):
    """A terminal DocumentResult to POST to the submission's callback.

    Written by deliver (and ingest, for its `failed` results) beside the result itself;
    the notify agent POSTs it. It is the only record that carries the callback URL:
    docs.results stays free of them (a callback URL may hold a client's token). A dead
    letter of this record, replayed, POSTs the same body with the same idempotency key.
    """

    doc_id: DocId
    # The callback as the submission gave it (validated there as an http(s) URL;
    # streams/webhooks/address.py checks it again, and every address it resolves to, per POST).
    callback: str = Field(min_length=1, max_length=8192)
    # "<doc_id>:<event id of the result record>": equal whenever the same result is
    # POSTed again (a redelivered page, a replayed dead letter), so receivers dedupe.
    idempotency_key: str = Field(min_length=1, max_length=512)
    # The result exactly as written to docs.results (claim-checked parts as references).
    result: DocumentResult
