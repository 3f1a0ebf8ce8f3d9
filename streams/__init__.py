"""The CPU side of pagestream: everything but the models (never imports torch).

At the top, the facts every process shares: `topics` (every topic, the single source of
truth), `routing` (`next_step()`, the one place that decides where a page goes next),
`settings` (one root for every process), `faults` (whose fault a failure is: the world's,
retried, or the record's, dead-lettered; a leaf the packages below all import), `blobs`
(the content-addressed claim-check store) and `claim_check` (what moves to it).
Then one package per concern:

    kafka       records as every process reads and writes them, and their dead letters
    media       uploads sniffed and split into pages, in a sandboxed render process
    webhooks    signed POSTs of results to checked callback addresses
    security    ACLs per role, credentials, TLS of the embedded broker
    telemetry   traces and the metrics both processes export
    client      submit documents, read results and progress
    admin       operator tooling: topics apply, lag, record counts, the exporter, DLQ tools
    local       the embedded Kafka broker and `pagestream up`
    agents      the faust agents: ingest, route, deliver, notify
    cli         the `pagestream` command line

docs/architecture.md draws them and follows one page through them.
"""

import os

# onnxruntime (under PyMuPDF's layout model here, RapidOCR on the GPU node) looks up a
# Microsoft telemetry host and writes a device id under ~/.cache on its first import
# unless this is set; a document pipeline on a private network must do neither. Set
# here, before anything imports it (the render processes import this package too).
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
