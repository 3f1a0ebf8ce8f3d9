"""ops/k8s validated offline: core kinds against Kubernetes' schemas, KEDA's ScaledObject
and the operator's PodMonitor against their CRDs, and the facts they share with the code
(topics, groups, settings names, ports) checked against the code."""

from __future__ import annotations

import copy
import functools
import os
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from prometheus_client import CollectorRegistry

from gateway.keys import KeyStore
from gateway.metrics import ApiMetrics
from streams.settings import (
    AgentSettings,
    ApiSettings,
    BlobSettings,
    ExporterSettings,
    KafkaSettings,
    NodeSettings,
    Settings,
)
from streams.settings.api import metrics_bind
from streams.topics import (
    CLASSIFIED,
    EXTRACTED,
    ORIENTED,
    PAGES_DONE,
    RAW,
    RECOGNIZED,
    WEBHOOKS,
)
from tests.support.manifests import setting_exists
from tests.support.prometheus import REPO, tool

K8S = REPO / "ops" / "k8s"
KUBERNETES_VERSION = "1.33.0"
GOMOD = Path(os.path.expanduser("~/.cache/pagestream/gomod"))


def _docs() -> list[dict[str, Any]]:
    return copy.deepcopy(_parsed())  # tests may edit what they get (a broken copy, say)


@functools.cache
def _parsed() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    docs += list(yaml.safe_load_all((K8S / "secrets.example.yaml").read_text()))
    return docs


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in _docs() if d["kind"] == kind]


def _named(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in _by_kind(kind) if d["metadata"]["name"] == name]
    return found


@functools.cache
def _crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema, from the CRDs listed in ops/k8s/crds.txt."""
    schemas = {}
    for line in (K8S / "crds.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        module, path = line.split()
        crd_file = GOMOD / module / path
        assert crd_file.exists(), f"{crd_file} missing: run `make k8s-schemas`"
        crd = yaml.safe_load(crd_file.read_text())
        for version in crd["spec"]["versions"]:
            api = f"{crd['spec']['group']}/{version['name']}"
            schemas[(api, crd["spec"]["names"]["kind"])] = version["schema"]["openAPIV3Schema"]
    return schemas


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The CRD schema refusing unknown fields where it lists the known ones, as the API
    server's strict field validation does."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(x) for x in schema]  # type: ignore[return-value]
    return schema


def test_core_kinds_validate_against_the_kubernetes_schemas() -> None:
    crds = _crd_schemas()
    core = [d for d in _docs() if (d["apiVersion"], d["kind"]) not in crds]
    assert {d["kind"] for d in core} >= {"Deployment", "StatefulSet", "Service", "ConfigMap"}
    for doc in core:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_custom_resources_validate_against_their_crds() -> None:
    crds = _crd_schemas()
    custom = [d for d in _docs() if (d["apiVersion"], d["kind"]) in crds]
    assert {d["kind"] for d in custom} == {"ScaledObject", "TriggerAuthentication", "PodMonitor"}
    for doc in custom:
        body = {k: v for k, v in doc.items() if k != "metadata"}  # metadata: ObjectMeta
        jsonschema.validate(body, _strict(crds[(doc["apiVersion"], doc["kind"])]))


def test_the_crd_check_catches_a_misspelled_field() -> None:
    crds = _crd_schemas()
    scaled = _named("ScaledObject", "pagestream-agents")
    bad = {k: v for k, v in scaled.items() if k != "metadata"}
    bad["spec"] = {**bad["spec"], "maxReplicas": 3}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _strict(crds[(scaled["apiVersion"], "ScaledObject")]))


def test_keda_scales_the_agents_on_their_group_capped_at_the_partition_count() -> None:
    spec = _named("ScaledObject", "pagestream-agents")["spec"]
    assert (spec["scaleTargetRef"]["kind"], spec["scaleTargetRef"]["name"]) == (
        "Deployment",
        _named("Deployment", "pagestream-agents")["metadata"]["name"],
    )
    faust, route, deliver = spec["triggers"]
    topology = Settings().topology
    groups = [t["metadata"]["consumerGroup"] for t in spec["triggers"]]
    assert groups == list(topology.agents_groups)
    inputs = (RAW, ORIENTED, CLASSIFIED, EXTRACTED, RECOGNIZED, PAGES_DONE, WEBHOOKS)
    assert spec["maxReplicaCount"] == max(t.partitions for t in inputs)
    bootstrap = _config_map("pagestream-config")["PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS"]
    for trigger in (faust, route, deliver):
        assert trigger["type"] == "kafka"
        assert trigger["metadata"]["bootstrapServers"] == bootstrap
        assert trigger["authenticationRef"] == faust["authenticationRef"]


def _config_map(name: str) -> dict[str, str]:
    (found,) = [d["data"] for d in _by_kind("ConfigMap") if d["metadata"]["name"] == name]
    return found  # type: ignore[no-any-return]


def _keda_kafka_auth(settings: KafkaSettings) -> dict[str, str]:
    """What KEDA's Kafka scaler calls the pods' Kafka security settings."""
    mechanisms = {"PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256",
                  "SCRAM-SHA-512": "scram_sha512"}  # fmt: skip
    return {
        "sasl": mechanisms[settings.sasl_mechanism] if settings.uses_sasl else "none",
        "tls": "enable" if settings.uses_ssl else "disable",
    }


def test_keda_logs_in_as_the_monitor_the_way_the_pods_do() -> None:
    from streams.security import acls

    scaled = _named("ScaledObject", "pagestream-agents")
    (auth,) = _by_kind("TriggerAuthentication")
    for trigger in scaled["spec"]["triggers"]:
        assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    params = {r["parameter"]: r for r in auth["spec"]["configMapTargetRef"]}
    keda = _config_map(params["sasl"]["name"])
    resolved = {p: keda[r["key"]] for p, r in params.items()}
    config = _config_map("pagestream-config")
    pods = KafkaSettings(
        security_protocol=config["PAGESTREAM_KAFKA__SECURITY_PROTOCOL"],
        sasl_mechanism=config["PAGESTREAM_KAFKA__SASL_MECHANISM"],
        sasl_username=resolved["username"],
        sasl_password="any",
    )
    assert {k: resolved[k] for k in ("sasl", "tls")} == _keda_kafka_auth(pods)
    assert resolved["username"] == acls.MONITOR
    (password,) = auth["spec"]["secretTargetRef"]
    assert (password["parameter"], password["name"], password["key"]) == (
        "password",
        "pagestream-kafka-users",
        acls.MONITOR,
    )
    # The mapping is not a tautology: a secured cluster reads differently.
    secured = KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                            sasl_username="monitor", sasl_password="any")  # fmt: skip
    assert _keda_kafka_auth(secured) == {"sasl": "scram_sha512", "tls": "enable"}


def test_the_gpu_node_keeps_a_stable_transactional_id() -> None:
    (node,) = _by_kind("StatefulSet")
    (container,) = node["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    tid = env["PAGESTREAM_NODE__TRANSACTIONAL_ID"]
    assert tid["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    services = {s["metadata"]["name"] for s in _by_kind("Service")}
    assert node["spec"]["serviceName"] in services
    probes = {container[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")}
    assert probes == {"/healthz", "/readyz"}
    assert container["ports"][0]["containerPort"] == NodeSettings().http_port


def test_every_pagestream_variable_is_a_setting_and_ports_match_the_defaults() -> None:
    names = []
    for doc in _docs():
        if doc["kind"] == "ConfigMap":
            names += list(doc["data"])
        if doc["kind"] == "Secret":
            names += list(doc["stringData"])
        pod = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in pod.get("containers", []):
            names += [e["name"] for e in container.get("env", [])]
    ours = [n for n in names if n.startswith("PAGESTREAM_")]
    assert ours and [n for n in ours if not setting_exists(n)] == []
    assert not setting_exists("PAGESTREAM_AGENTS__WEB_PORTT")
    templates = {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]
        for d in _docs()
        if d["kind"] in ("Deployment", "StatefulSet")
    }
    ports = {
        name: meta["annotations"]["prometheus.io/port"]
        for name, meta in templates.items()
        if "annotations" in meta
    }
    assert ports == {
        "pagestream-agents": str(AgentSettings().web_port),
        # Its metrics address, set in api.yaml (unset by default: then /metrics is on the
        # public port, for admin keys only).
        "pagestream-api": str(metrics_bind(_api_env()["PAGESTREAM_API__METRICS_ADDRESS"])[1]),
        "pagestream-gpu-node": str(NodeSettings().http_port),
        "pagestream-exporter": str(ExporterSettings().port),
    }


def test_every_kafka_client_pod_is_the_principal_of_its_role() -> None:
    """One principal per role (streams/security/acls.py); each pod reads only its own password."""
    from streams.security import acls

    want = {"agents": acls.AGENTS, "api": acls.API, "gpu-node": acls.GPU_NODE,
            "exporter": acls.MONITOR}  # fmt: skip
    users = next(d for d in _by_kind("Secret") if d["metadata"]["name"] == "pagestream-kafka-users")
    found = {}
    for doc in _docs():
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            env = {e["name"]: e for e in container.get("env", [])}
            if "PAGESTREAM_KAFKA__SASL_USERNAME" not in env:
                continue
            role = env["PAGESTREAM_KAFKA__SASL_USERNAME"]["value"]
            ref = env["PAGESTREAM_KAFKA__SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]
            assert (ref["name"], ref["key"]) == ("pagestream-kafka-users", role)
            found[container["name"]] = role
    assert found == want
    assert set(users["stringData"]) == set(want.values())


# The HTTP gateway (api.yaml): probes, keys, view, Service, scrape and scaling.


def _api_container() -> dict[str, Any]:
    (container,) = _named("Deployment", "pagestream-api")["spec"]["template"]["spec"]["containers"]
    return container


def _api_env() -> dict[str, str]:
    return {e["name"]: e["value"] for e in _api_container()["env"] if "value" in e}


def _mount_of(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The volume mount (and its volume) of the api container that holds `path`."""
    pod = _named("Deployment", "pagestream-api")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    holding = [m for m in _api_container()["volumeMounts"]
               if PurePosixPath(path).is_relative_to(m["mountPath"])]  # fmt: skip
    assert holding, f"{path} is on no volume"
    mount = max(holding, key=lambda m: len(m["mountPath"]))  # the innermost mount wins
    return mount, volumes[mount["name"]]


def test_the_api_runs_the_gateway_and_probes_it_on_its_http_port() -> None:
    container = _api_container()
    assert (container["image"], container["command"]) == ("pagestream", ["pagestream", "api"])
    port = next(p for p in container["ports"] if p["name"] == "http")
    assert port["containerPort"] == ApiSettings().port
    assert "PAGESTREAM_API__PORT" not in _api_env()  # the port above is the default
    probes = {p: container[p]["httpGet"] for p in ("livenessProbe", "readinessProbe")}
    assert probes == {"livenessProbe": {"path": "/healthz", "port": "http"},
                      "readinessProbe": {"path": "/readyz", "port": "http"}}  # fmt: skip
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert _named("Deployment", "pagestream-api")["spec"]["replicas"] >= 2


def test_the_api_reads_its_keys_from_the_secret_mounted_read_only_as_a_directory() -> None:
    keys_file = _api_env()["PAGESTREAM_API__KEYS_FILE"]
    mount, volume = _mount_of(keys_file)
    # A subPath mount never sees the Secret change: revoked keys would stay valid.
    assert "subPath" not in mount and "subPathExpr" not in mount
    assert mount["readOnly"] is True
    assert volume["secret"]["secretName"] == "pagestream-api-keys"
    assert "items" not in volume["secret"]  # every key of the Secret is a file of its name
    assert str(PurePosixPath(keys_file).parent) == mount["mountPath"].rstrip("/")
    example = _named("Secret", "pagestream-api-keys")["stringData"]
    assert list(example) == [PurePosixPath(keys_file).name]


def test_the_example_keys_secret_is_a_keys_file(tmp_path: Path) -> None:
    (content,) = _named("Secret", "pagestream-api-keys")["stringData"].values()
    path = tmp_path / "keys.json"
    path.write_text(content)
    assert KeyStore(path).keys() == []


def test_the_api_writes_only_to_empty_dirs() -> None:
    container = _api_container()
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    pod = _named("Deployment", "pagestream-api")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    mount, volume = _mount_of(_api_env()["PAGESTREAM_API__VIEW_FILE"])
    assert "emptyDir" in volume and not mount.get("readOnly", False)
    # SQLite's and Python's temporary files.
    assert "emptyDir" in _mount_of("/tmp/x")[1]  # noqa: S108


def test_the_api_accepts_no_upload_the_agents_would_refuse() -> None:
    config = _config_map("pagestream-config")
    blob_limit = int(config.get("PAGESTREAM_BLOBS__MAX_BLOB_BYTES", BlobSettings().max_blob_bytes))
    assert int(_api_env()["PAGESTREAM_API__MAX_UPLOAD_BYTES"]) <= blob_limit


def test_every_service_selects_one_workload_and_names_its_ports() -> None:
    workloads = [d for d in _docs() if d["kind"] in ("Deployment", "StatefulSet")]
    for service in _by_kind("Service"):
        selector = service["spec"]["selector"]
        chosen = [
            w
            for w in workloads
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(chosen) == 1, service["metadata"]["name"]
        (workload,) = chosen
        assert selector.items() <= workload["spec"]["selector"]["matchLabels"].items()
        named = {p["name"] for c in workload["spec"]["template"]["spec"]["containers"]
                 for p in c.get("ports", [])}  # fmt: skip
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in named, service["metadata"]["name"]
    api = _named("Service", "pagestream-api")
    assert api["spec"].get("type", "ClusterIP") == "ClusterIP"
    assert [(p["port"], p["targetPort"]) for p in api["spec"]["ports"]] == [(80, "http")]
    labels = _named("Deployment", "pagestream-api")["spec"]["template"]["metadata"]["labels"]
    assert api["spec"]["selector"].items() <= labels.items()


def _scrape_jobs(labels: dict[str, str], ports: set[str]) -> set[str]:
    """The job names the PodMonitors give a pod with these labels and named ports."""
    jobs = set()
    for monitor in _by_kind("PodMonitor"):
        selector = monitor["spec"]["selector"]
        if not selector.get("matchLabels", {}).items() <= labels.items():
            continue
        if not all(
            (labels.get(e["key"]) in e["values"]) == (e["operator"] == "In")
            for e in selector.get("matchExpressions", [])
        ):
            continue
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            if endpoint["port"] not in ports or endpoint.get("path", "/metrics") != "/metrics":
                continue
            (relabel,) = [r for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
            (source,) = relabel["sourceLabels"]
            label = source.removeprefix("__meta_kubernetes_pod_label_")
            value = next(v for k, v in labels.items() if k.replace(".", "_").replace("/", "_")
                         .replace("-", "_") == label)  # fmt: skip
            jobs.add(relabel["replacement"].replace("$1", value))
    return jobs


def test_the_pod_monitor_scrapes_the_api_as_pagestream_api() -> None:
    labels = _named("Deployment", "pagestream-api")["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"] for p in _api_container()["ports"]}
    assert _scrape_jobs(labels, ports) == {"pagestream-api"}
    # On its metrics address, which is not the public port (that has no /metrics).
    _, metrics_port = metrics_bind(_api_env()["PAGESTREAM_API__METRICS_ADDRESS"])
    by_name = {p["name"]: p["containerPort"] for p in _api_container()["ports"]}
    assert by_name["metrics"] == metrics_port != by_name["http"]
    assert _scrape_jobs(labels, {"http"}) == set()
    # The check is not a tautology: the vLLM server's pods are not scraped.
    vllm = _named("Deployment", "pagestream-vllm")["spec"]["template"]["metadata"]["labels"]
    assert _scrape_jobs(vllm, {"http"}) == set()


def test_keda_scales_the_api_on_its_request_rate() -> None:
    spec = _named("ScaledObject", "pagestream-api")["spec"]
    deployment = _named("Deployment", "pagestream-api")
    target = spec["scaleTargetRef"]
    assert (target.get("kind"), target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert spec["minReplicaCount"] == deployment["spec"]["replicas"] <= spec["maxReplicaCount"]
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger.get("metricType", "AverageValue") == "AverageValue"  # per replica
    assert float(trigger["metadata"]["threshold"]) > 0
    query = trigger["metadata"]["query"]
    registry = CollectorRegistry()
    ApiMetrics.create(registry)
    families = {f.name: f.type for f in registry.collect()}
    assert families["pagestream_api_request_duration_seconds"] == "histogram"
    assert "pagestream_api_request_duration_seconds_count{" in query  # requests, not seconds
    assert 'job="pagestream-api"' in query and 'route!="/metrics"' in query
    assert trigger["metadata"]["serverAddress"].startswith("http")


def test_the_scaler_query_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses the query offline as a recording rule's expression."""
    exprs = [t["metadata"]["query"] for s in _by_kind("ScaledObject") for t in s["spec"]["triggers"]
             if t["type"] == "prometheus"]  # fmt: skip
    assert exprs
    rules = {"groups": [{"name": "keda", "rules": [{"record": f"keda:query{i}", "expr": e}
                                                    for i, e in enumerate(exprs)]}]}  # fmt: skip
    path = tmp_path / "keda.rules.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run([tool("promtool"), "check", "rules", str(path)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
