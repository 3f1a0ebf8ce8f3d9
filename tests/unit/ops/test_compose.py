"""docker-compose.yml checked by docker-compose itself (`config`, no engine needed) and
against the code: settings names, scalable agents, the monitoring files it mounts."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import PurePosixPath
from typing import Any

import yaml

from streams.settings import ApiSettings, BlobSettings
from streams.settings.api import metrics_bind
from tests.support.manifests import setting_exists
from tests.support.prometheus import REPO, tool

COMPOSE = REPO / "docker-compose.yml"
SECRETS = {"MINIO_ROOT_PASSWORD": "test-only", "GRAFANA_ADMIN_PASSWORD": "test-only"}


def _config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run([tool("docker-compose"), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, check=False, cwd=REPO,
                          env={**clean, **env})  # fmt: skip


@functools.cache
def _rendered() -> str:
    """`docker-compose config` once per process (most tests read the same rendering)."""
    proc = _config(SECRETS)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _services() -> dict[str, Any]:
    return dict(yaml.safe_load(_rendered())["services"])


def test_docker_compose_config_accepts_the_file() -> None:
    services = _services()
    assert {"kafka", "topics", "agents", "api", "gpu-node", "vllm", "exporter", "prometheus",
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
    jobs = _scrape_jobs()
    assert jobs["pagestream-agents"]["dns_sd_configs"][0]["names"] == ["agents"]


def _scrape_jobs() -> dict[str, Any]:
    scrape = yaml.safe_load((REPO / "ops" / "prometheus" / "prometheus.yml").read_text())
    return {j["job_name"]: j for j in scrape["scrape_configs"]}


def _volume_at(service: dict[str, Any], path: str) -> str:
    """The source of the service's volume that holds `path` (the innermost one)."""
    mounts = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume["source"], volume["target"]
        mounts[target] = source
    holding = [t for t in mounts if PurePosixPath(path).is_relative_to(t)]
    assert holding, f"{path} is on no volume"
    return mounts[max(holding, key=len)]


def test_the_api_is_published_and_scraped_on_its_port() -> None:
    api = _services()["api"]
    assert api["command"] == ["pagestream", "api"]
    assert "PAGESTREAM_API__PORT" not in api["environment"]
    (port,) = api["ports"]
    target = port["target"] if isinstance(port, dict) else int(str(port).split(":")[-1])
    assert int(target) == ApiSettings().port
    assert "/readyz" in " ".join(api["healthcheck"]["test"])
    # Scraped on its metrics address, apart from the public port (which has no /metrics).
    _, metrics_port = metrics_bind(api["environment"]["PAGESTREAM_API__METRICS_ADDRESS"])
    assert str(metrics_port) in api["expose"] and int(target) != metrics_port
    job = _scrape_jobs()["pagestream-api"]
    (sd,) = job["dns_sd_configs"]
    assert (sd["names"], sd["port"]) == (["api"], metrics_port)
    assert job.get("metrics_path", "/metrics") == "/metrics"


def test_the_api_uses_the_agents_blob_store_and_a_limit_they_accept() -> None:
    services = _services()
    api, agents = services["api"]["environment"], services["agents"]["environment"]
    blob = [n for n in agents if n.startswith(("PAGESTREAM_BLOBS__", "AWS_"))]
    assert blob and {n: api.get(n) for n in blob} == {n: agents[n] for n in blob}
    for name in ("topics", "minio-init"):
        assert services["api"]["depends_on"][name]["condition"] == "service_completed_successfully"
    limit = int(api.get("PAGESTREAM_API__MAX_UPLOAD_BYTES", ApiSettings().max_upload_bytes))
    assert limit <= int(api.get("PAGESTREAM_BLOBS__MAX_BLOB_BYTES", BlobSettings().max_blob_bytes))


def test_the_api_keeps_its_keys_in_a_volume_its_user_may_write() -> None:
    """`docker compose exec api pagestream api-keys create` writes the keys file as the
    image's user; the gateway re-reads it. The volume starts root-owned: the init
    service gives it to that user first."""
    services = _services()
    api, init = services["api"], services["api-keys-init"]
    keys_file = api["environment"]["PAGESTREAM_API__KEYS_FILE"]
    volume = _volume_at(api, keys_file)
    assert not volume.startswith(("/", ".")), "a named volume, not a host folder"
    assert volume in yaml.safe_load(COMPOSE.read_text())["volumes"]
    keys_dir = str(PurePosixPath(keys_file).parent)
    assert _volume_at(init, keys_dir) == volume
    (user,) = re.findall(r"^USER\s+(\S+)\s*$", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    assert init["command"] == ["chown", user, keys_dir]
    assert api["depends_on"]["api-keys-init"]["condition"] == "service_completed_successfully"
    # The view is rebuildable and must not land in the image user's (absent) home.
    assert PurePosixPath(api["environment"]["PAGESTREAM_API__VIEW_FILE"]).is_relative_to("/tmp")  # noqa: S108


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
    want = {"topics": acls.ADMIN, "acls": acls.ADMIN, "agents": acls.AGENTS, "api": acls.API,
            "gpu-node": acls.GPU_NODE, "exporter": acls.MONITOR}  # fmt: skip
    for name, role in want.items():
        env = services[name]["environment"]
        assert env["PAGESTREAM_KAFKA__SASL_USERNAME"] == role, name
        assert env["PAGESTREAM_KAFKA__SASL_PASSWORD"] == "", f"{name}: a password in the file"
    secured = _config({**SECRETS, "PAGESTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                       "AGENTS_KAFKA_PASSWORD": "from-the-environment",
                       "API_KAFKA_PASSWORD": "the-api-one"})  # fmt: skip
    for name, password in (("agents", "from-the-environment"), ("api", "the-api-one")):
        env = yaml.safe_load(secured.stdout)["services"][name]["environment"]
        assert env["PAGESTREAM_KAFKA__SECURITY_PROTOCOL"] == "SASL_SSL"
        assert env["PAGESTREAM_KAFKA__SASL_PASSWORD"] == password
