"""A real Prometheus against a running pipeline: it scrapes the exporter, the GPU node and
an agent worker, sees the agents' lag grow and the stalled-group alert fire when the
agents stop, sees both clear when they come back, and reads lag 0 everywhere once idle."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schemas import DocumentType, Operation, Options
from streams.client.submit import Submitter
from streams.settings import ExporterSettings, Settings
from streams.topics import RAW, RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.exporter import running_exporter
from tests.support.pages import png_bytes, read_committed
from tests.support.prometheus import prometheus, shortened_rules

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

STALLED = "PagestreamConsumerGroupStalled"


@pytest.fixture
def exporter_port(cli_env: Settings) -> Iterator[int]:
    ours = f"^{re.escape(cli_env.topics.prefix)}"
    # The test's topics, and its groups: the agents' and the GPU node's (not prefixed).
    groups = f"{ours}|^{re.escape(cli_env.gpu_group)}$"
    # Judged over 8 readings 0.5 s apart: longer than faust's commit interval (about
    # 3 s), so a worker between two commits does not look stalled.
    conf = ExporterSettings(host="127.0.0.1", port=0, interval_s=0.5, window=8,
                            group_regex=groups, topic_regex=ours)  # fmt: skip
    with running_exporter(cli_env.kafka, conf) as port:
        yield port


def _submit(settings: Settings, images: list, first: int) -> list[str]:
    sub = Submitter(settings)
    ids = []
    for i, image in enumerate(images, start=first):
        doc_id = f"prom-{i}"
        sub.submit_bytes(png_bytes(image), operation=Operation.classify, doc_id=doc_id,
                         options=Options(auto_rotate=False))  # fmt: skip
        ids.append(doc_id)
    sub.flush()
    return ids


def test_prometheus_sees_the_lag_grow_the_alert_fire_and_both_clear(
    cli_env: Settings, topology: Topology, node_factory, exporter_port: int, tmp_path: Path
) -> None:
    settings = cli_env
    group = topology.agents_app
    raw = topology.name(RAW)
    pages = [s.image for s in generate(5, 8, doc_types=[DocumentType.cnh_front], rotations=[0],
                                       width=320)]  # fmt: skip
    worker = support.start_worker(tmp_path / "agents-1.log")
    restarted: support.Worker | None = None
    try:
        with node_factory() as node:
            jobs = {
                "pagestream-exporter": [f"127.0.0.1:{exporter_port}"],
                "pagestream-gpu-node": [f"127.0.0.1:{node.http_port}"],
                "pagestream-agents": [f"127.0.0.1:{worker.web_port}"],
            }
            rules = shortened_rules(tmp_path / "rules.yml")
            with prometheus(tmp_path / "prometheus", jobs, rules) as prom:
                # Every process is scraped.
                prom.wait("up == 1", lambda r: {x["metric"]["job"] for x in r} == set(jobs))
                prom.wait("pagestream_gpu_ready", lambda r: r and float(r[0]["value"][1]) == 1)

                _submit(settings, pages[:3], 0)
                read_committed(settings, [topology.name(RESULTS)], expect=3, timeout_s=180)

                # The agents stop; documents keep coming: their lag on docs.raw grows to
                # exactly what was submitted, and the stalled-group alert fires.
                worker.stop()
                _submit(settings, pages[3:], 3)
                lag = f'kafka_consumergroup_lag_sum{{consumergroup="{group}",topic="{raw}"}}'
                prom.wait(lag, lambda r: r and float(r[0]["value"][1]) == 5)
                firing = (f'ALERTS{{alertname="{STALLED}",alertstate="firing",'
                          f'consumergroup="{group}"}}')  # fmt: skip
                prom.wait(firing, lambda r: len(r) == 1)
                # Waited for, not read once: a scrape that timed out on a loaded machine
                # leaves the exporter's series stale, and an instant query then finds none.
                members = f'kafka_consumergroup_members{{consumergroup="{group}"}}'
                prom.wait(members, lambda r: r and float(r[0]["value"][1]) == 0)

                # They come back: every document ends, the alert clears, lag reads 0.
                restarted = support.start_worker(tmp_path / "agents-2.log",
                                                 web_port=worker.web_port)  # fmt: skip
                read_committed(settings, [topology.name(RESULTS)], expect=8, timeout_s=240)
                prom.wait(firing, lambda r: r == [], timeout_s=120)
                prom.wait(
                    "sum(kafka_consumergroup_lag)",
                    lambda r: r and float(r[0]["value"][1]) == 0,
                    timeout_s=60,
                )
                # Idle: lag 0 on every partition of every group (the agents', route's and
                # the GPU node's; the node's commit markers are not counted), and the
                # groups are OK.
                groups = {*topology.agents_groups, node.settings.group_id}

                def consumer_groups(rows: list[dict[str, Any]]) -> set[str]:
                    return {x["metric"]["consumergroup"] for x in rows}

                prom.wait("kafka_consumergroup_lag",
                          lambda r: consumer_groups(r) == groups
                          and all(float(x["value"][1]) == 0 for x in r), timeout_s=60)  # fmt: skip
                prom.wait('pagestream_consumergroup_status{status="OK"} == 1',
                          lambda r: consumer_groups(r) == groups, timeout_s=60)  # fmt: skip
    finally:
        for w in (worker, restarted):
            if w is not None:
                w.stop()
        print(worker.tail())
