"""The soak's samples: consumer lag per group, RSS and open file descriptors of every
process of the pipeline, and the size of deliver's table, every few seconds."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil  # type: ignore[import-untyped]
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from streams.admin.lag import all_lag
from streams.admin.records import record_counter
from streams.kafka import clients as kafka
from streams.local import broker
from streams.local.up import Child
from streams.settings import Settings
from streams.topics import DELIVER_TABLE_CHANGELOG

log = logging.getLogger(__name__)
MIB = 1024 * 1024


@dataclass
class Sample:
    t_s: float  # seconds since the steady load started
    values: dict[str, float] = field(default_factory=dict)  # series -> value
    pids: dict[str, int] = field(default_factory=dict)  # process label -> pid

    def as_dict(self) -> dict[str, object]:
        return {"t_s": round(self.t_s, 1), "values": self.values, "pids": self.pids}


def processes(settings: Settings, children: list[Child]) -> dict[str, psutil.Process]:
    """Every process of the pipeline by a stable label: the broker's JVMs, each child
    (`gpu-node`, `agents`) and what they started (the agents' render processes)."""
    found: dict[str, psutil.Process] = {}
    info = broker.status(settings.broker)
    nodes = info.nodes if info is not None else ()
    for node in nodes:
        found["broker" if len(nodes) == 1 else f"broker {node.node_id}"] = psutil.Process(node.pid)
    for child in children:
        try:
            top = psutil.Process(child.proc.pid)
            below = sorted(top.children(recursive=True), key=lambda p: (p.create_time(), p.pid))
        except psutil.NoSuchProcess:
            continue
        found[child.name] = top
        renders = [p for p in below if "streams.media.render_child" in " ".join(_cmdline(p))]
        others = [p for p in below if p not in renders]
        # A render process replaced (a timeout, a crash) takes over its slot's label.
        found.update({f"{child.name} render {k + 1}": p for k, p in enumerate(renders)})
        found.update({f"{child.name} child {k + 1}": p for k, p in enumerate(others)})
    return found


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return list(p.cmdline())
    except psutil.Error:
        return []


class TableSize:
    """deliver's table as its changelog holds it (what a worker recovering the partitions
    rebuilds, entry for entry): read incrementally, the latest value per key, deletions
    dropped. Entries are documents collecting pages, delivered markers (kept
    `delivered_ttl_s`), pages and documents' attributes."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.topology.name(DELIVER_TABLE_CHANGELOG)
        self.consumer = kafka.consumer(settings.kafka, f"soak-table-{uuid.uuid4().hex[:8]}",
                                       **{"enable.partition.eof": True})  # fmt: skip
        parts = self.consumer.list_topics(self.topic, timeout=10).topics[self.topic].partitions
        self.partitions = sorted(parts)
        self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING)
                              for p in self.partitions])  # fmt: skip
        self.entries: dict[bytes, tuple[int, bool]] = {}  # key -> (record bytes, is a marker)
        self.next: dict[int, int] = {}  # partition -> next offset to read

    def read(self, budget_s: float = 5.0) -> dict[str, float]:
        """Reads up to the changelog's end as it is now (or for `budget_s`)."""
        ends = {p: self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), 10)[1]
                for p in self.partitions}  # fmt: skip
        pending = {p for p, end in ends.items() if self.next.get(p, 0) < end}
        deadline = time.monotonic() + budget_s
        while pending and time.monotonic() < deadline:
            for msg in self.consumer.consume(1000, 0.2):
                err, key, value = msg.error(), msg.key(), msg.value()
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self.next[partition] = offset
                    continue
                self.next[partition] = offset + 1
                if key is None:
                    continue
                if value is None:
                    self.entries.pop(key, None)
                else:
                    self.entries[key] = (len(key) + len(value), b'"delivered"' in value)
            pending = {p for p in pending if self.next.get(p, 0) < ends[p]}
        docs = [(size, marker) for key, (size, marker) in self.entries.items() if b"/" not in key]
        return {
            "table entries": float(len(self.entries)),
            "table MiB": sum(size for size, _ in self.entries.values()) / MIB,
            "table markers": float(sum(1 for _, marker in docs if marker)),
            "table documents collecting": float(sum(1 for _, marker in docs if not marker)),
        }

    def close(self) -> None:
        self.consumer.close()


class Sampler(threading.Thread):
    """Takes a sample every `interval_s` on its own thread (its own Kafka clients), so
    the submissions keep their steady rate while a sample is taken."""

    def __init__(self, settings: Settings, children: list[Child], interval_s: float,
                 counts: Callable[[], dict[str, float]]) -> None:  # fmt: skip
        super().__init__(name="soak-sampler", daemon=True)
        self.settings = settings
        self.children = children
        self.interval_s = interval_s
        self.counts = counts
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self._stopping = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        topo = self.settings.topology
        groups = {topo.agents_app: "agents", topo.route_group: "route",
                  topo.deliver_group: "deliver",
                  self.settings.gpu_group: "gpu-node"}  # fmt: skip
        admin = kafka.admin(self.settings.kafka)
        counter = record_counter(self.settings.kafka)
        table = TableSize(self.settings)
        try:
            due = time.monotonic()
            while not self._stopping.is_set():
                self.samples.append(self._take(admin, counter, table, groups))
                due += self.interval_s
                self._stopping.wait(max(0.0, due - time.monotonic()))
            self.samples.append(self._take(admin, counter, table, groups))  # at the end
        finally:
            table.close()
            counter.close()

    def _take(self, admin: object, counter: object, table: TableSize,
              groups: dict[str, str]) -> Sample:  # fmt: skip
        sample = Sample(time.monotonic() - self.started_at)
        sample.values.update(self.counts())
        try:
            for lag in all_lag(admin, list(groups), counter):  # type: ignore[arg-type]
                sample.values[f"lag {groups[lag.group]}"] = float(lag.total_lag)
        except KafkaException as exc:
            self.errors.append(f"lag at {sample.t_s:.0f} s: {exc}")
        try:
            sample.values.update(table.read())
        except KafkaException as exc:
            self.errors.append(f"table at {sample.t_s:.0f} s: {exc}")
        for label, proc in processes(self.settings, self.children).items():
            try:
                with proc.oneshot():
                    memory, fds, cpu = proc.memory_info(), proc.num_fds(), proc.cpu_times()
            except psutil.Error:
                continue  # ended between listing and reading: a replaced render process
            sample.values[f"RSS {label} MiB"] = memory.rss / MIB
            # Of it, pages of mapped files (libraries, the broker's mmapped indexes): the
            # kernel can drop them; a leak is in the rest.
            sample.values[f"RSS {label} MiB, file-backed"] = memory.shared / MIB
            sample.values[f"FDs {label}"] = float(fds)
            sample.values[f"CPU s {label}"] = cpu.user + cpu.system
            sample.pids[label] = proc.pid
        return sample

    def stop(self) -> None:
        self._stopping.set()
        self.join(60)
