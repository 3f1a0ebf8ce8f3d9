"""The webhook notifier: POSTs a completed document's result to its callback.

A delivery that keeps failing becomes a dead letter holding the result (the result
itself is already on docs.results), which an operator replays once the receiver is
back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx

from schemas import headers
from streams import tracing, webhook
from streams.agents.deliver import WebhookCall
from streams.agents.metrics import AgentMetrics
from streams.envelope import Origin, Outgoing, dead_letter
from streams.settings import AgentSettings
from streams.webhook import WebhookError, WebhookPolicy

SendAll = Callable[[list[Outgoing]], Awaitable[None]]

STAGE = "webhook"


class WebhookNotifier:
    def __init__(
        self, settings: AgentSettings, metrics: AgentMetrics, send_all: SendAll, *, group: str
    ) -> None:
        self._secret = settings.webhook_secret
        self._policy = WebhookPolicy(
            secret=self._secret.get_secret_value().encode() if self._secret else b"",
            allow_private=settings.webhook_allow_private,
            attempts=settings.webhook_attempts,
            timeout_s=settings.webhook_timeout_s,
        )
        self._metrics = metrics
        self._send_all = send_all
        self._group = group
        self._dlq = metrics.dlq_topic
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, origin: Origin, call: WebhookCall) -> None:
        try:
            if self._secret is None:
                raise WebhookError(
                    "a callback was given but PAGESTREAM_AGENTS__WEBHOOK_SECRET is not set"
                )
            if self._client is None:
                # Created on the agent's loop. No proxies from the environment: webhook.post
                # connects to checked addresses, and a proxy would be handed the address.
                self._client = httpx.AsyncClient(trust_env=False)
            key, policy = call.idempotency_key, self._policy
            # Child of the result's record: the trace ends with the callback.
            result = call.result_emit
            doc_id = (result.key or b"").decode(errors="replace")
            parent = result.header(headers.TRACEPARENT)
            with tracing.hop("webhook", parent, attributes={"pagestream.doc_id": doc_id}):
                await webhook.post(
                    self._client, call.url, call.body, idempotency_key=key, policy=policy
                )
            self._metrics.webhooks.labels("delivered").inc()
        except Exception as exc:  # WebhookError, or anything a hostile URL makes httpx raise
            self._metrics.webhooks.labels("failed").inc()
            # The dead letter carries the result as written to docs.results, with the
            # coordinates of the page that completed the document.
            result = call.result_emit
            failed = Origin(result.topic, origin.partition, origin.offset, origin.timestamp_ms,
                            result.key, call.body, tuple(result.headers))  # fmt: skip
            await self._send_all([dead_letter(failed, dlq_topic=self._dlq, stage=STAGE,
                                              group=self._group, exc=exc)])  # fmt: skip
