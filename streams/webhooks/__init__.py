"""Webhooks: a terminal DocumentResult POSTed to the submission's callback.

`record` builds the WebhookDelivery that deliver and ingest write beside a result;
the notify agent POSTs it (`post.post`): the callback's `address` is resolved (c-ares,
bounded and cancellable) and checked (public addresses only, unless allowed), the body
is `signing`-signed for the receiver, and failed attempts are retried within bounds.
Every failure ends as a `WebhookError`.

The function `post` is not named here: bound in this package, it would hide the module
streams.webhooks.post, which callers import as a whole
(`from streams.webhooks import post as webhook`, then `webhook.post(...)`).
"""

from __future__ import annotations

from streams.webhooks.address import IPAddress, Resolver, Target, is_public, parse, resolve
from streams.webhooks.errors import WebhookError, WebhookURLRefused
from streams.webhooks.post import WebhookPolicy
from streams.webhooks.record import webhook_record
from streams.webhooks.signing import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature,
)

__all__ = [
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "IPAddress",
    "Resolver",
    "Target",
    "WebhookError",
    "WebhookPolicy",
    "WebhookURLRefused",
    "is_public",
    "parse",
    "resolve",
    "signature",
    "webhook_record",
]
