"""Benchmarks of the pipeline, each run as `python -m bench.<name>`, and the harness code
they share with the tests (tests may import bench; bench never imports tests).

Benchmarks (each module's or package's docstring says what it measures and how):
- agents/: route and deliver throughput, one worker against two;
- chaos.py: documents through the pipeline while its processes and the broker die;
- gateway/: the HTTP gateway under Locust's load (locustfile.py is Locust's side), and
  what it adds over producing to Kafka directly;
- gpu_node.py: the GPU node through Kafka against the same models called directly;
- ocr.py: the text layer, an OCR engine and a VLM on the same pages;
- pipeline.py: documents per second end to end and the latency of each Kafka hop;
- quality/: reading quality of each reader on public pages (its corpus under data/);
- render.py: what ingest's render process costs;
- soak/: half an hour of steady load; nothing may keep growing.

Shared by the benchmarks and the tests:
- cluster.py: a throw-away embedded broker on free ports, or the cluster given;
- processes.py: a free port, and stopping child processes (SIGTERM, then SIGKILL);
- hostile_records.py: the fuzzer's hostile records (Hypothesis strategies);
- stats.py: percentiles.

results/ holds the recorded results of each benchmark.
"""
