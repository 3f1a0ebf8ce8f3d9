"""`pagestream exporter`: consumer lag, Burrow-style status and topic offsets for Prometheus.

The exporter reads the cluster every `interval_s` (sampler.py), judges each group
over its last readings (status.py) and serves the latest reading under
kafka_exporter's metric names (metrics.py) on /metrics.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry, start_http_server

from streams.admin.exporter.metrics import SnapshotCollector
from streams.admin.exporter.sampler import Sampler
from streams.admin.records import record_counter
from streams.kafka import clients as kafka
from streams.settings import ExporterSettings, KafkaSettings

log = logging.getLogger(__name__)


class Exporter:
    def __init__(
        self,
        kafka_settings: KafkaSettings,
        settings: ExporterSettings,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry or CollectorRegistry()
        self.collector = SnapshotCollector()
        self._http: tuple[Any, threading.Thread] | None = None
        self.registry.register(self.collector)
        self._counter = record_counter(kafka_settings, settings.scan_limit)
        self._sampler = Sampler(
            kafka.admin(kafka_settings),
            self._counter,
            settings.window,
            settings.group_regex,
            settings.topic_regex,
        )

    def read_once(self) -> bool:
        try:
            snap = self._sampler.sample()
        except KafkaException as exc:
            # Keep serving the last reading (its age is exported) and say it failed.
            self.collector.failures += 1
            self.collector.last_ok = False
            log.warning("reading the cluster failed: %s", exc)
            return False
        self.collector.snapshot = snap
        self.collector.last_ok = True
        return True

    def start_http(self) -> int:
        """Serve /metrics from a background thread; returns the port (useful with port 0)."""
        server, thread = start_http_server(
            self.settings.port, addr=self.settings.host, registry=self.registry
        )
        self._http = (server, thread)
        port = int(server.server_port)
        log.info("exporter serving /metrics on %s:%d", self.settings.host, port)
        return port

    def run(self, stop: threading.Event) -> None:
        """Read the cluster every interval until `stop` is set, then stop serving."""
        try:
            while not stop.is_set():
                self.read_once()
                stop.wait(self.settings.interval_s)
        finally:
            if self._http is not None:
                server, thread = self._http
                server.shutdown()
                thread.join(5)
            self._counter.close()
