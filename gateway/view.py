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

import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from gateway.view_rows import ROW, DocumentRow, Waiting, open_file, write_progress, write_result
from schemas import DocumentResult, Progress, RecordError, decode
from streams.blobs import BlobStore
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import PROGRESS, RESULTS

__all__ = ["DocumentRow", "View", "Waiting"]  # the rows are view_rows.py's

log = logging.getLogger(__name__)


class View:
    """The SQLite file and the thread that keeps it current."""

    def __init__(
        self,
        settings: Settings,
        path: Path,
        *,
        on_change: Callable[[Iterable[str]], None] | None = None,
        store: BlobStore | None = None,
    ) -> None:
        self._settings = settings
        # Where the results go, by reference (the gateway's store: its answers too).
        self._store = store if store is not None else BlobStore.from_settings(settings.blobs)
        self._progress_topic = settings.topology.name(PROGRESS)
        self._results_topic = settings.topology.name(RESULTS)
        self._topics = (self._progress_topic, self._results_topic)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        open_file(self._db)
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
                f"SELECT {ROW} FROM documents WHERE doc_id = ?",  # noqa: S608 - a constant
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
        query = f"SELECT {ROW} FROM documents"  # noqa: S608 - a constant
        args: tuple[object, ...] = (limit,)
        if tenant is not None:
            query += " WHERE tenant = ?"
            args = (tenant, limit)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY updated_at DESC LIMIT ?", args)
            return [DocumentRow(*r) for r in rows.fetchall()]

    def stored_bytes(self, tenant: str) -> int:
        """What `tenant`'s documents take in the view (rows, results by reference)."""
        with self._lock:
            row = self._db.execute("SELECT bytes FROM usage WHERE tenant = ?", (tenant,))
            found = row.fetchone()
        return int(found[0]) if found else 0

    def oldest(self, tenant: str) -> float | None:
        """When `tenant`'s oldest document ended (or last moved): the first to leave."""
        with self._lock:
            (at,) = self._db.execute(
                "SELECT MIN(COALESCE(ended_at, updated_at)) FROM documents WHERE tenant = ?",
                (tenant,),
            ).fetchone()
        return float(at) if at is not None else None

    def note_answers(self, doc_id: str, result_sha256: str, answers: str | None) -> None:
        """The answers built from the result `result_sha256` (None: built again on the
        next read); kept only while that result is still the document's."""
        with self._lock:
            self._db.execute(
                "UPDATE documents SET answers = ? WHERE doc_id = ? AND result_sha256 = ?",
                (answers, doc_id, result_sha256),
            )

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
        decoded: list[Progress | tuple[DocumentResult, str, int] | None] = []
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
                        changed.add(write_progress(self._db, record, now))
                    elif record is not None:
                        changed.add(write_result(self._db, *record, now))
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
    ) -> Progress | tuple[DocumentResult, str, int] | None:
        """The record, or None for a tombstone (the topic forgets; the view keeps its
        row) and for what is not ours to judge (the writers are pagestream's agents).
        A result is stored in the blob store here, outside the view's lock, and kept by
        reference: its sha256 and size (a store that fails raises: the view retries)."""
        if value is None:
            return None
        try:
            if topic == self._progress_topic:
                return decode(Progress, value)
            result = decode(DocumentResult, value)
        except RecordError:
            return None
        stored = self._store.put(value)
        return result, stored.sha256, stored.size_bytes

    def _apply_progress(self, value: bytes, now: float) -> str | None:
        record = self._decode(self._progress_topic, value)
        return write_progress(self._db, record, now) if isinstance(record, Progress) else None

    def _apply_result(self, value: bytes, now: float) -> str | None:
        record = self._decode(self._results_topic, value)
        return write_result(self._db, *record, now) if isinstance(record, tuple) else None

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
