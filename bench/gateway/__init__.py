"""The HTTP gateway under load: requests/s per gateway core, submission latency, and
what the gateway adds over producing the record to Kafka directly, measured in one run.

    python -m bench.gateway [--users 20] [--seconds 60] [--out bench/results/gateway]

Starts its own throw-away broker (free ports, temp dir) unless --bootstrap is given,
applies the topics under a fresh prefix, makes an API key (gateway.keys.KeyStore) in the
temp dir, and runs one `pagestream agents` worker (so documents end) and one
`pagestream api` replica as child processes. The replica's per-key limits
(PAGESTREAM_API__RATE_PER_S, MAX_IN_FLIGHT) are lifted: they are policy, and a 429
costs next to nothing, which would flatter the figures. Every other PAGESTREAM_*
variable of this process reaches the children. Then, on a warm pipeline (one document
through first):

1. idle, one request at a time, --samples rounds, the steps alternating within each
   round so a slow phase of the machine hits them all:
   - `produce + flush`: the project's producer (streams.kafka.clients.producer, as
     configured: acks=all, idempotent, linger.ms=5, zstd), one record of the gateway's
     docs.raw record size (a DocumentSubmitted naming the uploaded blob, encoded as the
     gateway encodes it) to a docs.raw of its own (same spec, another prefix, no
     consumer), flush() after each: the direct produce-and-ack;
   - `produce, ack callback`: the same producer, waiting for the delivery report
     through poll() instead of flush();
   - `Publisher, 1 record` and `Publisher, docs.raw + docs.progress`: the gateway's own
     publishing path (gateway.publish.Publisher, its linger.ms=2, a poll thread, the
     acknowledgement handed to the event loop), one record, then the two records a
     submission awaits one after the other; `Publisher linger 0` the same two with the
     producer's linger.ms set to 0 (a what-if: the gateway's code is not changed);
   - `blob write + commit`: the upload's blob (streams.blobs BlobWriter: a partial
     file, fsync, then the content address; the same bytes every time, as here);
   - `POST /v1/documents`: one client (httpx, keep-alive) submitting the PDF the
     Locust users upload.
2. load: Locust headless (bench/locustfile.py, a subprocess: gevent patches what it
   runs in) with --users users for --seconds. Meanwhile this process produces and
   flushes one record every 0.1 s (sequentially, as in 1.) to measure the direct
   produce on the same machine at the same moment, and samples the CPU time of the
   gateway process (user + system, all threads; psutil) every 0.25 s.

Reported (printed, and gateway.md / gateway.json under --out, with Locust's CSVs):
- requests/s of the load overall, and requests handled per second of gateway CPU
  (the gateway's CPU seconds between Locust's test start and stop, interpolated from
  the samples): what one gateway core does, on a machine the gateway shares with the
  broker, the agents and the load generator;
- p50 / p99 of POST /v1/documents, exact (from every successful submission's latency,
  bench/locustfile.py's PAGESTREAM_BENCH_SAMPLES) and Locust's own (rounded);
- added latency: POST p50 minus the direct produce + flush p50, and their ratio, under
  load and idle. The target (issue 26) is at most 10 ms at p50. A POST does more than a
  produce: parse the multipart upload, sniff it, write the blob (fsync, rename), check
  the key and the tenant's documents in flight (the SQLite view), produce docs.raw and
  wait for its acknowledgement, then produce the `submitted` record to docs.progress
  and wait for that one too, then answer.

Modules: locust.py loads bench/locustfile.py unpatched and reads Locust's CSV;
children.py starts the pipeline's processes and checks one document through;
steps.py times each idle step; load.py runs Locust while sampling the gateway's CPU and
the direct produce; figures.py derives the figures and writes the table; run.py is one
whole run; __main__.py is the command.
"""
