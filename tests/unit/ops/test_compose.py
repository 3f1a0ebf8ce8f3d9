"""docker-compose.yml checked by docker-compose itself (`config`, no engine needed) and
against the code: settings names, scalable agents, the monitoring files it mounts."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import yaml

from tests.support.manifests import setting_exists
from tests.support.prometheus import REPO, tool

COMPOSE = REPO / "docker-compose.yml"
SECRETS = {"MINIO_ROOT_PASSWORD": "test-only", "GRAFANA_ADMIN_PASSWORD": "test-only"}


def _config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run([tool("docker-compose"), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, check=False, cwd=REPO,
                          env={**clean, **env})  # fmt: skip


def _services() -> dict[str, Any]:
    proc = _config(SECRETS)
    assert proc.returncode == 0, proc.stderr
    return dict(yaml.safe_load(proc.stdout)["services"])


def test_docker_compose_config_accepts_the_file() -> None:
    services = _services()
    assert {"kafka", "topics", "agents", "gpu-node", "vllm", "exporter", "prometheus",
            "grafana"} <= set(services)  # fmt: skip


def test_secrets_must_come_from_the_environment() -> None:
    proc = _config({"MINIO_ROOT_PASSWORD": "x"})
    assert proc.returncode != 0 and "GRAFANA_ADMIN_PASSWORD" in proc.stderr


def test_agents_scale_and_are_scraped() -> None:
    services = _services()
    agents = services["agents"]
    # A published host port or a container name would stop `--scale agents=N`.
    assert "ports" not in agents and "container_name" not in agents
    assert agents["environment"]["PAGESTREAM_AGENTS__WEB_HOST"] == "0.0.0.0"  # noqa: S104
    scrape = yaml.safe_load((REPO / "ops" / "prometheus" / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in scrape["scrape_configs"]}
    assert jobs["pagestream-agents"]["dns_sd_configs"][0]["names"] == ["agents"]


def test_mounted_monitoring_files_exist() -> None:
    for name in ("prometheus", "grafana"):
        for volume in _services()[name]["volumes"]:
            source = volume.split(":")[0] if isinstance(volume, str) else volume["source"]
            if source.startswith(("/", ".")):
                assert (REPO / source).exists(), source


def test_every_pagestream_variable_is_a_setting() -> None:
    names = [n for s in _services().values() for n in s.get("environment", {})]
    ours = [n for n in names if n.startswith("PAGESTREAM_")]
    assert ours and [n for n in ours if not setting_exists(n)] == []


def test_every_kafka_client_is_the_principal_of_its_role() -> None:
    """One principal per role (streams/security/acls.py), its password only from the environment."""
    from streams.security import acls

    services = _services()
    want = {"topics": acls.ADMIN, "acls": acls.ADMIN, "agents": acls.AGENTS,
            "gpu-node": acls.GPU_NODE, "exporter": acls.MONITOR}  # fmt: skip
    for name, role in want.items():
        env = services[name]["environment"]
        assert env["PAGESTREAM_KAFKA__SASL_USERNAME"] == role, name
        assert env["PAGESTREAM_KAFKA__SASL_PASSWORD"] == "", f"{name}: a password in the file"
    secured = _config({**SECRETS, "PAGESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                       "AGENTS_KAFKA_PASSWORD": "from-the-environment"})  # fmt: skip
    env = yaml.safe_load(secured.stdout)["services"]["agents"]["environment"]
    assert env["PAGESTREAM_KAFKA__SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["PAGESTREAM_KAFKA__SASL_PASSWORD"] == "from-the-environment"
