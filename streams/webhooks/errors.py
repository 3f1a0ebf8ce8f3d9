"""How a webhook POST fails: the errors of streams/webhooks/, in one place for address and post.

`WebhookError` (and its `WebhookURLRefused`) end a delivery: the notify agent
dead-letters the WebhookDelivery. `Retryable` never leaves `post`: it marks a failure
that the next attempt may not meet (a name that does not resolve yet, a 503), and
becomes a WebhookError once the attempts are spent.
"""

from __future__ import annotations


class WebhookError(RuntimeError):
    """The webhook could not be delivered (refused URL, or every attempt failed)."""


class WebhookURLRefused(WebhookError):
    pass


class Retryable(Exception):
    pass
