"""ops/k8s validated offline: core kinds against Kubernetes' schemas, KEDA's ScaledObject
and the operator's PodMonitor against their CRDs, and the facts they share with the code
(topics, groups, settings names, ports) checked against the code."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from streams.settings import (
    AgentSettings,
    ExporterSettings,
    KafkaSettings,
    NodeSettings,
    Settings,
)
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
from tests.support.prometheus import REPO

K8S = REPO / "ops" / "k8s"
KUBERNETES_VERSION = "1.33.0"
GOMOD = Path(os.path.expanduser("~/.cache/pagestream/gomod"))


def _docs() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    docs += list(yaml.safe_load_all((K8S / "secrets.example.yaml").read_text()))
    return docs


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in _docs() if d["kind"] == kind]


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
    (scaled,) = _by_kind("ScaledObject")
    bad = {k: v for k, v in scaled.items() if k != "metadata"}
    bad["spec"] = {**bad["spec"], "maxReplicas": 3}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _strict(crds[(scaled["apiVersion"], "ScaledObject")]))


def test_keda_scales_the_agents_on_their_group_capped_at_the_partition_count() -> None:
    (scaled,) = _by_kind("ScaledObject")
    spec = scaled["spec"]
    deployments = {d["metadata"]["name"] for d in _by_kind("Deployment")}
    assert spec["scaleTargetRef"]["name"] in deployments
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "kafka"
    assert trigger["metadata"]["consumerGroup"] == Settings().topology.agents_app
    inputs = (RAW, ORIENTED, CLASSIFIED, EXTRACTED, RECOGNIZED, PAGES_DONE, WEBHOOKS)
    assert spec["maxReplicaCount"] == max(t.partitions for t in inputs)
    bootstrap = _config_map("pagestream-config")["PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS"]
    assert trigger["metadata"]["bootstrapServers"] == bootstrap


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

    (scaled,) = _by_kind("ScaledObject")
    (trigger,) = scaled["spec"]["triggers"]
    (auth,) = _by_kind("TriggerAuthentication")
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
        "pagestream-gpu-node": str(NodeSettings().http_port),
        "pagestream-exporter": str(ExporterSettings().port),
    }


def test_every_kafka_client_pod_is_the_principal_of_its_role() -> None:
    """One principal per role (streams/security/acls.py); each pod reads only its own password."""
    from streams.security import acls

    want = {"agents": acls.AGENTS, "gpu-node": acls.GPU_NODE, "exporter": acls.MONITOR}
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
