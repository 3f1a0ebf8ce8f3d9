"""The replica's view of the pipeline: docs.progress and docs.results, materialized into
one SQLite file.

The topics stay the source of truth: the view stores the offset it has applied for each
partition in the same transaction as the rows, so a restart resumes where it stopped and
a lost file is rebuilt from the start of the (compacted) topics. No consumer group: the
view assigns every partition and commits nothing, so replicas never share or steal work.
`ready` turns true once every partition has been read up to where it ended at start-up.

Besides the topics, the replica notes the documents it submitted itself, so it knows
them (and whose they are) before their first progress record comes back.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from schemas import DocumentResult, Progress, RecordError, decode
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import PROGRESS, RESULTS

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    tenant TEXT,
    pages_total INTEGER NOT NULL DEFAULT 0,
    pages_done INTEGER,
    status TEXT,
    result TEXT,
    submitted_at REAL,
    updated_at REAL NOT NULL,
    ended_at REAL
);
CREATE INDEX IF NOT EXISTS documents_tenant ON documents (tenant, ended_at);
CREATE INDEX IF NOT EXISTS documents_ended ON documents (ended_at);
CREATE TABLE IF NOT EXISTS pages (
    doc_id TEXT NOT NULL,
    page_no INTEGER NOT NULL,
    stage TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (doc_id, page_no)
);
CREATE TABLE IF NOT EXISTS offsets (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
);
"""


@dataclass(frozen=True)
class Waiting:
    stage: str
    pages: int
    since: float  # epoch seconds: the oldest page's arrival in that stage


# The columns of a DocumentRow, in its fields' order.
_ROW = "doc_id, tenant, pages_total, pages_done, status, result, submitted_at, updated_at, ended_at"


@dataclass(frozen=True)
class DocumentRow:
    doc_id: str
    tenant: str | None
    pages_total: int
    pages_done: int | None
    status: str | None  # completed | partial | failed once ended
    result: str | None  # the DocumentResult's JSON as docs.results carried it
    submitted_at: float | None
    updated_at: float
    ended_at: float | None

    @property
    def ended(self) -> bool:
        return self.result is not None

    @property
    def state(self) -> Literal["submitted", "running", "ended"]:
        """Ended once its result is in; running once ingest has split it."""
        return "ended" if self.ended else "running" if self.pages_total else "submitted"


class View:
    """The SQLite file and the thread that keeps it current."""

    def __init__(
        self,
        settings: Settings,
        path: Path,
        *,
        on_change: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        self._settings = settings
        self._progress_topic = settings.topology.name(PROGRESS)
        self._results_topic = settings.topology.name(RESULTS)
        self._topics = (self._progress_topic, self._results_topic)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self._on_change = on_change
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None  # why the view is not catching up, when it is not

    # --- reads (request handlers) ---

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    def document(self, doc_id: str) -> DocumentRow | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_ROW} FROM documents WHERE doc_id = ?",  # noqa: S608 - a constant
                (doc_id,),
            ).fetchone()
        return DocumentRow(*row) if row else None

    def waiting(self, doc_id: str) -> list[Waiting]:
        with self._lock:
            rows = self._db.execute(
                "SELECT stage, COUNT(*), MIN(at) FROM pages WHERE doc_id = ? GROUP BY stage"
                " ORDER BY MIN(at)",
                (doc_id,),
            ).fetchall()
        return [Waiting(*r) for r in rows]

    def in_flight(self, tenant: str) -> int:
        """Documents of `tenant` submitted and not yet ended, as this view sees them."""
        with self._lock:
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM documents WHERE tenant = ? AND ended_at IS NULL", (tenant,)
            ).fetchone()
        return int(count)

    def recent(self, tenant: str | None, limit: int = 50) -> list[DocumentRow]:
        """The latest documents of `tenant` (every tenant's for None), newest first."""
        query = f"SELECT {_ROW} FROM documents"  # noqa: S608 - a constant
        args: tuple[object, ...] = (limit,)
        if tenant is not None:
            query += " WHERE tenant = ?"
            args = (tenant, limit)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY updated_at DESC LIMIT ?", args)
            return [DocumentRow(*r) for r in rows.fetchall()]

    # --- the replica's own submissions ---

    def note_submitted(self, doc_id: str, tenant: str, submitted_at: float) -> None:
        """The document is on docs.raw: known here before its first progress record."""
        with self._lock:
            self._db.execute(
                "INSERT INTO documents (doc_id, tenant, submitted_at, updated_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (doc_id) DO NOTHING",
                (doc_id, tenant, submitted_at, submitted_at),
            )

    # --- the thread ---

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pagestream-view", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self._db.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            consumer = kafka.consumer(
                self._settings.kafka,
                f"pagestream-api-view-{uuid.uuid4().hex[:8]}",  # never joined: assign only
                **{"enable.auto.offset.store": False, "enable.partition.eof": True},
            )
            try:
                self._follow(consumer)
            except Exception as exc:  # Kafka, SQLite (a full disk): not ready, retried
                detail = exc.args[0].str() if isinstance(exc, KafkaException) and exc.args else exc
                self.error = f"view: {type(exc).__name__}: {detail}"
                self._ready.clear()
                log.warning("%s; retrying", self.error)
                self._stop.wait(2.0)
            finally:
                consumer.close()

    def _follow(self, consumer: Consumer) -> None:
        assignment = self._assignment(consumer)
        consumer.assign(assignment)
        # Caught up once every partition has reported its end (librdkafka's EOF event
        # counts transaction markers and compacted gaps, which no message shows).
        behind = {(tp.topic, tp.partition) for tp in assignment}
        next_expiry = 0.0
        while not self._stop.is_set():
            msgs = consumer.consume(500, 0.5)
            for msg in msgs:
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    behind.discard((str(msg.topic()), int(msg.partition() or 0)))
                elif err is not None:  # an authorization refused, say: /readyz shows it
                    self.error = f"view: {err.str()}"
                    if err.fatal() or not err.retriable():
                        raise KafkaException(err)
            changed = self._apply(msgs) if msgs else set()
            if changed and self._on_change is not None:
                self._on_change(changed)
            if not behind and not self._ready.is_set():
                self.error = None
                self._ready.set()
                log.info("view: caught up with %d partitions", len(assignment))
            if time.monotonic() >= next_expiry:
                self._expire()
                next_expiry = time.monotonic() + 60

    def _assignment(self, consumer: Consumer) -> list[TopicPartition]:
        with self._lock:
            stored = {
                (t, p): o
                for t, p, o in self._db.execute("SELECT topic, partition, next_offset FROM offsets")
            }
        assignment: list[TopicPartition] = []
        for topic in self._topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            if meta.error is not None:
                raise KafkaException(meta.error)
            for p in sorted(meta.partitions):
                low, _ = consumer.get_watermark_offsets(TopicPartition(topic, p), 10)
                start = stored.get((topic, p), OFFSET_BEGINNING)
                if start != OFFSET_BEGINNING and start < low:
                    start = OFFSET_BEGINNING  # compacted or deleted under the stored offset
                assignment.append(TopicPartition(topic, p, start))
        return assignment

    def _apply(self, msgs: list[Message]) -> set[str]:
        # Decoded before the lock is taken: handlers read the view meanwhile.
        decoded: list[Progress | tuple[DocumentResult, bytes] | None] = []
        offsets: dict[tuple[str, int], int] = {}
        for msg in msgs:
            if msg.error() is not None:
                continue
            topic, partition = str(msg.topic()), int(msg.partition() or 0)
            offsets[(topic, partition)] = int(msg.offset() or 0) + 1
            decoded.append(self._decode(topic, msg.value()))
        changed: set[str] = set()
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN")
            try:
                for record in decoded:
                    if isinstance(record, Progress):
                        changed.add(self._write_progress(record, now))
                    elif record is not None:
                        changed.add(self._write_result(*record, now))
                self._db.executemany(
                    "INSERT INTO offsets VALUES (?, ?, ?) ON CONFLICT (topic, partition)"
                    " DO UPDATE SET next_offset = excluded.next_offset",
                    [(t, p, o) for (t, p), o in offsets.items()],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return changed

    def _decode(
        self, topic: str, value: bytes | None
    ) -> Progress | tuple[DocumentResult, bytes] | None:
        """The record, or None for a tombstone (the topic forgets; the view keeps its
        row) and for what is not ours to judge (the writers are pagestream's agents)."""
        if value is None:
            return None
        try:
            if topic == self._progress_topic:
                return decode(Progress, value)
            return decode(DocumentResult, value), value
        except RecordError:
            return None

    def _apply_progress(self, value: bytes, now: float) -> str | None:
        record = self._decode(self._progress_topic, value)
        return self._write_progress(record, now) if isinstance(record, Progress) else None

    def _apply_result(self, value: bytes, now: float) -> str | None:
        record = self._decode(self._results_topic, value)
        return self._write_result(*record, now) if isinstance(record, tuple) else None

    def _write_progress(self, progress: Progress, now: float) -> str:
        at = progress.at.timestamp()
        self._db.execute(
            "INSERT INTO documents (doc_id, tenant, pages_total, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (doc_id) DO UPDATE SET tenant = COALESCE(tenant, excluded.tenant),"
            " pages_total = MAX(pages_total, excluded.pages_total), updated_at = ?",
            (progress.doc_id, progress.tenant, progress.pages_total, now, now),
        )
        if progress.page_no is None:
            if progress.stage == "submitted":
                self._db.execute(
                    "UPDATE documents SET submitted_at = COALESCE(submitted_at, ?)"
                    " WHERE doc_id = ?",
                    (at, progress.doc_id),
                )
            elif progress.pages_done is not None:
                self._db.execute(
                    "UPDATE documents SET pages_done = ? WHERE doc_id = ?",
                    (progress.pages_done, progress.doc_id),
                )
            return progress.doc_id
        # A page of an ended document (a late or redelivered record) is not waiting
        # anywhere; and a redelivered route record may say a done page moved: done stays.
        self._db.execute(
            "INSERT INTO pages SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM documents"
            " WHERE doc_id = ? AND result IS NOT NULL) ON CONFLICT (doc_id, page_no) DO UPDATE"
            " SET stage = excluded.stage, at = excluded.at WHERE pages.stage != 'done'",
            (progress.doc_id, progress.page_no, progress.stage, at, progress.doc_id),
        )
        if progress.pages_done is not None:
            self._db.execute(
                "UPDATE documents SET pages_done = MAX(COALESCE(pages_done, 0), ?)"
                " WHERE doc_id = ?",
                (progress.pages_done, progress.doc_id),
            )
        return progress.doc_id

    def _write_result(self, result: DocumentResult, value: bytes, now: float) -> str:
        done = sum(1 for p in result.pages if p.error is None) if result.pages else None
        self._db.execute(
            "INSERT INTO documents (doc_id, tenant, pages_total, pages_done, status, result,"
            " submitted_at, updated_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (doc_id) DO UPDATE SET tenant = COALESCE(tenant, excluded.tenant),"
            " pages_total = excluded.pages_total,"
            " pages_done = COALESCE(excluded.pages_done, pages_done), status = excluded.status,"
            " result = excluded.result, updated_at = excluded.updated_at,"
            " ended_at = excluded.ended_at",
            (
                result.doc_id,
                result.tenant,
                result.page_count,
                done,
                result.status,
                value.decode(),
                result.submitted_at.timestamp(),
                now,
                result.completed_at.timestamp(),
            ),
        )
        self._db.execute("DELETE FROM pages WHERE doc_id = ?", (result.doc_id,))
        return result.doc_id

    def _expire(self) -> None:
        """Ended documents past the retention leave; so do documents that never ended
        and have not moved for as long (their records outlived their result, or their
        pipeline lost them): neither may count as in flight for ever."""
        cutoff = time.time() - self._settings.api.retention_s
        with self._lock:
            gone = self._db.execute(
                "DELETE FROM documents WHERE COALESCE(ended_at, updated_at) < ?", (cutoff,)
            ).rowcount
            self._db.execute("DELETE FROM pages WHERE doc_id NOT IN (SELECT doc_id FROM documents)")
        if gone:
            log.info("view: %d documents past retention left the view", gone)


def result_of(row: DocumentRow) -> DocumentResult | None:
    return DocumentResult.model_validate(json.loads(row.result)) if row.result else None
