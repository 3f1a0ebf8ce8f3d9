"""The CPU agents: the steps that take a document from docs.raw to its result, and the
loops that run them in a `pagestream agents` worker.

    app               the faust app (ingest, notify), route's and deliver's loops; run_worker
    pipelined         ingest's loop (records in flight, acks in order)
    batches           route's and deliver's loop: poll, step, produce, ack, commit
    batch_sends       a batch's outputs acknowledged, or its records' dead letters
    loops             route's and deliver's loops built, each in a thread of the worker
    takeover          a new group starting where the faust group left a partition
    ingest            DocumentSubmitted -> one PageState per page
    route             a page back from a GPU stage -> its next topic
    deliver           a document's pages -> one DocumentResult (and its webhook record)
    deliver_batches   deliver's step and table in its batch loop
    changelog_table   deliver's table: a dict, its writes on a changelog topic
    document_entries  deliver's table, entry by entry: pages per document, markers, expiry
    aggregate         the pages of a document -> its DocumentResult
    notify            POSTs the webhook records
    failure_policy    RecordHandling: the world's failures retried, the record's
                      dead-lettered, nothing lost (ingest, notify)
    ack_window        acknowledgement windows: inputs acked in order as outputs are
    progress          docs.progress records written as pages move
    consumer          faust's transport: read_committed, rewinding, hand-back before a
                      rebalance
    json_table        a bytes table as str -> JSON, each write measured
    spans             a hop's trace span
    metrics           the agents' Prometheus metrics
    collector         the garbage collector, set once a worker's boot is done

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
