"""The load: Locust headless in a subprocess while a thread samples the gateway's CPU
time and times a direct produce + flush; what the gateway and the machine did meanwhile."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from bench.gateway.children import Child, spawn
from bench.gateway.figures import cpu_between
from bench.gateway.locust import SKIP_PATCH, locust_rows, locustfile
from bench.gateway.steps import Direct

log = logging.getLogger("bench.gateway")
LOAD_PRODUCE_EVERY_S = 0.1
CPU_SAMPLE_S = 0.25


class Sampler(threading.Thread):
    """In the background: the gateway's cumulative CPU seconds every CPU_SAMPLE_S, and a
    direct produce + flush every LOAD_PRODUCE_EVERY_S."""

    def __init__(self, gateway_pid: int, direct: Direct) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.process = psutil.Process(gateway_pid)
        self.direct = direct
        self.cpu: list[tuple[float, float]] = []
        self.produce_ms: list[float] = []
        self.stop = threading.Event()

    def _cpu(self) -> None:
        times = self.process.cpu_times()
        self.cpu.append((time.time(), times.user + times.system))

    def run(self) -> None:
        next_cpu = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_cpu:
                self._cpu()
                next_cpu = now + CPU_SAMPLE_S
            self.produce_ms.append(self.direct.flush())
            self.stop.wait(max(0.0, LOAD_PRODUCE_EVERY_S - (time.monotonic() - now)))
        self._cpu()


def _cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def run_load(users: int, seconds: float, url: str, key: str, out: Path,
             sampler: Sampler, agents: Child, logs: Path) -> dict[str, Any]:  # fmt: skip
    """Locust headless for `seconds`; what the gateway and the machine did meanwhile."""
    samples_file = logs / "locust-samples.json"
    env = {k: v for k, v in os.environ.items() if k != SKIP_PATCH}
    env |= dict(PAGESTREAM_BENCH_API_KEY=key, PAGESTREAM_BENCH_SAMPLES=str(samples_file),
               PAGESTREAM_BENCH_SECONDS=f"{seconds:g}")  # fmt: skip
    script = Path(sys.executable).with_name("locust")
    # No `-t`: the locustfile ends the run `seconds` after its test starts.
    args = [str(script), "-f", str(Path(locustfile.__file__)), "--headless",
            "-u", str(users), "-r", str(users), "--host", url,
            "--csv", str(out / "locust"), "--only-summary", "--loglevel", "WARNING",
            "--exit-code-on-error", "0"]  # fmt: skip
    agents_proc = psutil.Process(agents.proc.pid)
    agents_before = _cpu_s(agents_proc) + sum(_cpu_s(c) for c in agents_proc.children())
    machine_before = psutil.cpu_times()
    sampler.start()
    launched = time.time()
    locust = spawn("locust", args, env, logs)
    locust_proc = psutil.Process(locust.proc.pid)
    locust_cpu = 0.0
    try:
        while locust.proc.poll() is None:
            with contextlib.suppress(psutil.Error):  # it may end between the two calls
                locust_cpu = max(locust_cpu, _cpu_s(locust_proc))
            time.sleep(0.5)
    finally:
        sampler.stop.set()
        sampler.join(30)
        locust.stop()
    log.warning("locust ran %.1f s (exit %s)", time.time() - launched, locust.proc.returncode)
    machine_after = psutil.cpu_times()
    agents_after = _cpu_s(agents_proc) + sum(_cpu_s(c) for c in agents_proc.children())
    if locust.proc.returncode != 0 or not samples_file.exists():
        raise RuntimeError(f"locust exited with {locust.proc.returncode}:\n"
                           f"{locust.log.read_text(errors='replace')[-3000:]}")  # fmt: skip
    samples = json.loads(samples_file.read_text())
    start, stop = samples["test_start"], samples["test_stop"]
    rows = locust_rows(out / "locust_stats.csv")
    http = [r for r in rows if r.kind in ("POST", "GET")]
    idle = machine_after.idle - machine_before.idle
    total = sum(machine_after) - sum(machine_before)
    return {
        "wall_s": stop - start,
        "requests": sum(r.requests for r in http),
        "submissions": sum(r.requests for r in http if r.name == locustfile.SUBMIT),
        "failures": sum(r.failures for r in http),
        "gateway_cpu_s": cpu_between(sampler.cpu, start, stop),
        "locust_cpu_s": locust_cpu,
        "agents_cpu_s": agents_after - agents_before,
        "machine_busy": 1 - idle / total if total > 0 else float("nan"),
        "submit_ms": samples["submit_ms"],
        "produce_ms": sampler.produce_ms,
        "rows": rows,
    }
