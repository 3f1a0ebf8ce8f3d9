"""`python -m bench.agents --profile DIR`: where one worker's CPU goes under the bench's
load, sampled by py-spy from outside the process (no change to the worker, no
instrumentation overhead in it).

Two samplers watch the one worker from the moment the records arrive until its group
has committed them all: one writes an SVG flame graph (`AGENT.svg`), the other the
collapsed stacks (`AGENT.folded`, which speedscope and flamegraph.pl read too). Both
sample without stopping the process (`--nonblocking`) and only while a thread runs
Python (py-spy leaves out idle threads), so the figures are the worker's own busy time.
`shares()` folds the stacks into the parts of a record's life (poll, decode, step,
encode, produce, commit, table, ...) by the innermost frame that names one, and the
bench prints the table the agents page of the docs shows.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

RATE_HZ = 250
STOP_TIMEOUT_S = 60.0

# (part, substrings of "function (file:line)" frames). A sample goes to the innermost
# frame that names one of these parts; where the order matters (a frame naming two),
# the first listed wins.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("table (changelog)", ("faust/tables", "json_table.py", "document_entries.py")),
    ("commit", ("commit", "ack_window.py")),
    ("produce", ("aiokafka/producer", "send_and_wait", "produce", "_flush (")),
    (
        "poll",
        (
            "aiokafka/consumer",
            "getmany",
            "faust/transport",
            "_poll (",
            "from_message",
            "from_faust_event",
        ),
    ),
    ("decode + validate", ("model_validate", "validate_json", "decode (", "json/decoder")),
    ("encode", ("model_dump", "dump_json", "encode (", "json/encoder", "envelope.py")),
    ("step", ("routing.py", "route.py", "deliver.py", "failure_policy.py")),
    ("faust sensors + logging", ("faust/sensors", "mode/utils/logging", "logging/")),
    ("headers + tracing", ("opentelemetry", "headers.py", "tracing")),
    ("metrics", ("prometheus_client",)),
    ("kafka sockets", ("aiokafka/conn", "asyncio/streams.py")),
)
# Samples no part names: the event loop's own frames, or a thread's outermost frame
# when it runs native code (uvloop, the faust service threads' loops).
LOOPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("event loop", ("asyncio/", "uvloop", "selectors.py", "mode/worker.py")),
    ("faust service threads", ("mode/threads.py",)),
)
OTHER = "other"


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise RuntimeError("py-spy is not installed: it comes with the dev extra")
    return found


@dataclass
class Profiler:
    """Two py-spy samplers on one worker process, from `start()` to `stop()`."""

    pid: int
    out_dir: Path
    name: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def svg(self) -> Path:
        return self.out_dir / f"{self.name}.svg"

    @property
    def folded(self) -> Path:
        return self.out_dir / f"{self.name}.folded"

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for fmt, path in (("flamegraph", self.svg), ("raw", self.folded)):
            cmd = [py_spy(), "record", "--pid", str(self.pid), "--rate", str(RATE_HZ),
                   "--nonblocking", "--format", fmt, "--output", str(path)]  # fmt: skip
            log = (self.out_dir / f"{self.name}.{fmt}.log").open("wb")
            self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=log))  # noqa: S603

    def stop(self) -> None:
        """py-spy writes its file when interrupted."""
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _part(stack: str) -> str:
    frames = stack.split(";")
    for parts in (PARTS, LOOPS):
        for frame in reversed(frames):
            for part, needles in parts:
                if any(needle in frame for needle in needles):
                    return part
    return OTHER


def shares(folded: Path) -> dict[str, float]:
    """Each part's share of the samples, largest first."""
    counts: Counter[str] = Counter()
    for line in folded.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            counts[_part(stack)] += int(count)
    total = sum(counts.values())
    return {part: n / total for part, n in counts.most_common()} if total else {}
