"""`pagestream exporter` in a thread of the test, serving on a free port."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from streams.admin.exporter import Exporter
from streams.settings import ExporterSettings, KafkaSettings


@contextmanager
def running_exporter(kafka: KafkaSettings, conf: ExporterSettings) -> Iterator[int]:
    """The exporter reading the cluster every `conf.interval_s`; yields its port."""
    exporter = Exporter(kafka, conf)
    port = exporter.start_http()
    stop = threading.Event()
    thread = threading.Thread(target=exporter.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join(30)
