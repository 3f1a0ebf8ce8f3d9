"""A real Prometheus server (Debian's `prometheus` package, installed by `make ops-tools`)
on a free port, scraping the test's processes and evaluating the project's alert rules."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.processes import free_port, stop
from streams.local.ready import wait_until_answering
from tests.support.agents import SCRAPER

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "ops" / "prometheus" / "rules" / "pagestream.rules.yml"


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path is not None, f"{name} not found: `make ops-tools` installs Debian's prometheus"
    return path


@dataclass
class Prometheus:
    url: str
    log: Path

    def query(self, promql: str) -> list[dict[str, Any]]:
        r = SCRAPER.get(f"{self.url}/api/v1/query", params={"query": promql})
        r.raise_for_status()
        body = r.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def value(self, promql: str) -> float | None:
        """The single value of a query, None when it returns nothing."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait(self, promql: str, check: Any, timeout_s: float = 90) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(promql)
            if check(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{promql}: still {result} after {timeout_s}s")
            time.sleep(0.5)


def shortened_rules(dest: Path, for_s: str = "2s") -> Path:
    """The shipped rules with every `for:` cut to a few seconds: expressions and
    thresholds stay as shipped, only the waiting is made test-sized."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = for_s
    dest.write_text(yaml.safe_dump(rules, sort_keys=False))
    return dest


@contextmanager
def prometheus(folder: Path, jobs: dict[str, list[str]], rules: Path) -> Iterator[Prometheus]:
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": targets}]}
            for job, targets in jobs.items()
        ],
    }
    cfg = folder / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config))
    check = subprocess.run([tool("promtool"), "check", "config", str(cfg)],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    log = folder / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [tool("prometheus"), f"--config.file={cfg}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=out,
        )  # fmt: skip
    server = Prometheus(f"http://127.0.0.1:{port}", log)

    def alive() -> None:
        assert proc.poll() is None, log.read_text()[-3000:]

    try:
        assert wait_until_answering(f"{server.url}/-/ready", timeout_s=60, alive=alive), (
            "prometheus not ready"
        )
        yield server
    finally:
        stop([proc], timeout_s=20)
