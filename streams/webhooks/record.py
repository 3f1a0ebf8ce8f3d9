"""The WebhookDelivery record a terminal result produces, for the notify agent to POST.

Both agents that end a document write one beside its DocumentResult when the
submission gave a callback: deliver (every page in, or the deadline passed) and ingest
(a document that cannot be split ends `failed`). The callback travels on docs.webhooks
only, never on docs.results (a callback URL may hold a client's token).
"""

from __future__ import annotations

from schemas import DocumentResult, WebhookDelivery, headers
from streams.kafka.envelope import Origin, Outgoing, next_record
from streams.topics import WEBHOOKS, Topology


def webhook_record(
    topology: Topology,
    result: DocumentResult,
    result_emit: Outgoing,
    callback: str,
    origin: Origin,
    step: str,
) -> Outgoing:
    """The WebhookDelivery of `result_emit` (`result` on docs.results) for the notify
    agent: the callback travels here only, never on docs.results. Its idempotency key,
    doc_id and the result's event id, is equal whenever the same input is redone."""
    doc_id, event_id = result.doc_id, result_emit.header(headers.EVENT_ID)
    assert event_id is not None  # noqa: S101 - next_record sets it
    delivery = WebhookDelivery(doc_id=doc_id, callback=callback,
                               idempotency_key=f"{doc_id}:{event_id}", result=result)  # fmt: skip
    return next_record(topology.name(WEBHOOKS), doc_id, delivery, origin, f"{step}:webhook")
