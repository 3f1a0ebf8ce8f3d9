"""Soak: the whole pipeline for half an hour at a steady rate, ordinary documents with
5 % generated hostile ones; nothing it holds may keep growing once warm.

    python -m bench.soak --minutes 30 --rate 5 --out bench/results/soak

What for: a leak shows only over time. A process whose memory or descriptors creep up,
a table that keeps what it should drop, a consumer that falls behind a little more each
minute: each passes every test that runs for seconds. Here each must stay flat once
warm, growth under 10 % from minute 10 to minute 30 (for a shorter run: from the end of
its first third to its end).

How: the pipeline `pagestream up` runs (streams/local/up.py's `running_pipeline`: the
embedded broker on free ports in a scratch folder, topics, `pagestream gpu-node` on CPU
with its real models, one `pagestream agents` worker), fed by the project's Submitter at
`--rate` documents a second: born-digital one-page reports with operation `ocr` (read
from their text layer by ingest's render processes) and, one in five, small upright
ID pages with operation `classify` (the GPU node's page model). Every twentieth is
instead a submission drawn by the fuzzer's strategies (bench/hostile_records.py:
any operation, sizes around the record limit, odd URIs into the blob store, broken
JSON, huge headers), produced as it is (hypothesis, from the `dev` extra).

The rate is not a capacity test: at 10 documents/s a 3-minute trial on the project's
2-core machine kept up (under 20 documents in flight, the pipeline's processes using
about 0.7 of a core), so the default of 5 keeps the pipeline well below saturation,
where growing lag would only say the rate is too high, on a machine shared with others.

Every `--interval-s` (10 s) it samples: consumer lag in records of the agents' group and
of the GPU node's (streams/operations/lag.py); RSS and open file descriptors of every
process of the pipeline (the broker's JVM, the GPU node, the agents worker and its
render processes; psutil); deliver's table (entries and bytes, read from its changelog,
which holds what the worker's table holds); documents submitted, ended and in flight.
deliver's markers are kept `--delivered-ttl-s` (default: half the warm-up; a day in
production, when the table grows for a day by design) and a document missing pages ends
after `--deadline-s`, so the table reaches its steady size within the warm-up.

Reported, under --out: soak.png (a panel per series; dashed: the judged span; shaded:
the spans whose medians are compared; thin beside RSS: its file-backed part, pages of
mapped files the kernel may drop), soak.md (per series: its value once warm and at the
end, the growth between those medians, flat or grew; documents submitted vs ended, and
any that did not end within the grace period after the last submission; each process's
CPU as a share of one core) and soak.json (every sample). Series that idle near zero
are judged against a floor (see `report.floor`).
A document ends with a result on docs.results, or a hostile record that never became a
document with its dead letter. Exit code 1 when a series grew by 10 % or more, a
document did not end, or a process of the pipeline died.

Modules: run.py starts the pipeline, warms it, submits at the rate while sampling and
waits for every document to end; load.py is the load and its ledger (what became of
each document); sample.py takes the samples; report.py judges the series and writes
the outputs; __main__.py is the command.
"""
