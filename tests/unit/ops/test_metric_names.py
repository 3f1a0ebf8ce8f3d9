"""Every metric the Grafana dashboard, the alert rules and the KEDA scalers query is one the
processes export, under that exact name: a renamed metric breaks this test, not a dashboard
or an autoscaler in production."""

from __future__ import annotations

import json
import re

import yaml
from prometheus_client import CollectorRegistry

from gateway.metrics import ApiMetrics
from gpu_node.node.metrics import NodeMetrics
from streams.admin.exporter.metrics import SnapshotCollector
from streams.admin.exporter.sampler import Snapshot
from streams.agents.metrics import AgentMetrics
from tests.support.prometheus import REPO, RULES

DASHBOARD = REPO / "ops" / "grafana" / "dashboards" / "pagestream.json"
KEDA = REPO / "ops" / "k8s" / "keda.yaml"
# Series Prometheus itself makes: `up` per target, ALERTS per alert.
PROMETHEUS_OWN = {"up", "ALERTS"}
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
}


def _exported() -> set[str]:
    node, agents, exporter, api = (CollectorRegistry() for _ in range(4))
    NodeMetrics(node)
    ApiMetrics.create(api)
    AgentMetrics(agents, "docs.dlq")
    collector = SnapshotCollector()
    collector.snapshot = Snapshot(taken_at=0, duration_s=0)
    exporter.register(collector)
    names = set()
    for registry in (node, agents, exporter, api):  # one per process, as in production
        for family in registry.collect():
            names.update(family.name + s for s in _SUFFIXES[family.type])
    return names


def _metric_names(expr: str) -> set[str]:
    # Metric names are the identifiers that start with the exporters' prefixes, or
    # Prometheus's own series; label names, functions and keywords never do.
    idents = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    return {i for i in idents if i.startswith(("pagestream_", "kafka_")) or i in PROMETHEUS_OWN}


def _dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def _rule_exprs() -> list[str]:
    rules = yaml.safe_load(RULES.read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def _scaler_exprs() -> list[str]:
    return [
        t["metadata"]["query"]
        for d in yaml.safe_load_all(KEDA.read_text())
        if d and d["kind"] == "ScaledObject"
        for t in d["spec"]["triggers"]
        if t["type"] == "prometheus"
    ]


def test_every_dashboard_metric_is_exported() -> None:
    exported = _exported() | PROMETHEUS_OWN
    used = set().union(*(_metric_names(e) for e in _dashboard_exprs()))
    assert used - exported == set()
    # The dashboard covers what the issue asks of it.
    needed = {
        "kafka_consumergroup_lag",
        "pagestream_gpu_batch_size_records_bucket",
        "pagestream_gpu_stage_latency_seconds_bucket",
        "pagestream_dead_letters_total",
        "pagestream_agent_webhooks_total",
        "pagestream_documents_ended_total",
        "pagestream_agent_records_in_total",
        "pagestream_gpu_records_in_total",
    }
    assert needed <= used


def test_every_alert_rule_metric_is_exported() -> None:
    exported = _exported() | PROMETHEUS_OWN
    used = set().union(*(_metric_names(e) for e in _rule_exprs()))
    assert used - exported == set()


def test_every_scaler_metric_is_exported() -> None:
    used = set().union(*(_metric_names(e) for e in _scaler_exprs()))
    assert "pagestream_api_request_duration_seconds_count" in used
    assert used - _exported() == set()


def test_the_name_check_catches_a_renamed_metric() -> None:
    assert _metric_names('sum(rate(pagestream_agent_record_in_total{agent="x"}[1m]))') - (
        _exported()
    ) == {"pagestream_agent_record_in_total"}


def test_dashboard_panels_use_the_provisioned_datasource_and_unique_ids() -> None:
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    datasources = yaml.safe_load(
        (REPO / "ops" / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    uid = datasources["datasources"][0]["uid"]
    for panel in dash["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == uid, panel["title"]
