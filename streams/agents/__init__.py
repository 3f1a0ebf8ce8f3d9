"""The CPU agents: one faust app whose agents take a document from docs.raw to its result.

    app               the faust app: topics, deliver's table, agents registered; run_worker
    pipelined         the ingest, route and deliver loops (records in flight, acks in order)
    ingest            DocumentSubmitted -> one PageState per page
    route             a page back from a GPU stage -> its next topic
    deliver           a document's pages -> one DocumentResult (and its webhook record)
    document_entries  deliver's table, entry by entry: pages per document, markers, expiry
    aggregate         the pages of a document -> its DocumentResult
    notify            POSTs the webhook records
    failure_policy    RecordHandling: the world's failures retried, the record's
                      dead-lettered, nothing lost
    ack_window        acknowledgement windows: inputs acked in order as outputs are
    progress          docs.progress records written as pages move
    consumer          faust's transport: read_committed, rewinding, hand-back before a
                      rebalance
    json_table        a faust table as str -> JSON over its raw bytes, each write measured
    metrics           the agents' Prometheus metrics

The plain objects (route, deliver, failure_policy) are named here; `app`, `pipelined`,
`ingest` and `notify` are imported where used: they load faust's worker, the render
stack and the webhook client.
"""

from __future__ import annotations

from streams.agents.deliver import Deliver, Delivery
from streams.agents.failure_policy import RecordHandling, Sent
from streams.agents.metrics import AgentMetrics
from streams.agents.route import Router

__all__ = ["AgentMetrics", "Deliver", "Delivery", "RecordHandling", "Router", "Sent"]
