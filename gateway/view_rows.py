"""The view's SQLite file: its tables, its rows as the handlers read them, and the writes
of each record (gateway/view.py runs them in its transactions, under its lock).

A row is a document's summary; its result is kept by reference: the docs.results
record, in the blob store under its sha256 (`result_sha256`), and once read, the answers
built from it (gateway/answers.py) as references too. So a row stays a few hundred bytes
whatever the result holds. `stored_bytes` is what a document takes (its row, its result
record), and `usage` keeps each tenant's sum, by triggers, for the tenant's quota.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal

from schemas import DocumentResult, Progress

# The file's layout; a file of another (an older replica's) is emptied and rebuilt from
# the topics, as a lost one is.
VERSION = 3

# What a row takes in the file, its indexes and its answers' references included (five
# blob references since the document JSON and chunks: about 1.2 kB),
# beside its result (an estimate that errs high: the quota counts it for every
# document, ended or not). The default of the `stored_bytes` column below, written there
# as a literal (test_view checks the two agree).
ROW_BYTES = 2048

_TABLES = """
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    tenant TEXT,
    pages_total INTEGER NOT NULL DEFAULT 0,
    pages_done INTEGER,
    status TEXT,
    submitted_at REAL,
    updated_at REAL NOT NULL,
    ended_at REAL,
    result_sha256 TEXT,
    answers TEXT,
    stored_bytes INTEGER NOT NULL DEFAULT 2048
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
CREATE TABLE IF NOT EXISTS usage (
    tenant TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS usage_insert AFTER INSERT ON documents BEGIN
    INSERT INTO usage VALUES (COALESCE(NEW.tenant, ''), NEW.stored_bytes)
    ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER IF NOT EXISTS usage_update AFTER UPDATE OF tenant, stored_bytes ON documents
BEGIN
    UPDATE usage SET bytes = bytes - OLD.stored_bytes WHERE tenant = COALESCE(OLD.tenant, '');
    INSERT INTO usage VALUES (COALESCE(NEW.tenant, ''), NEW.stored_bytes)
    ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER IF NOT EXISTS usage_delete AFTER DELETE ON documents BEGIN
    UPDATE usage SET bytes = bytes - OLD.stored_bytes WHERE tenant = COALESCE(OLD.tenant, '');
END;
"""


def open_file(db: sqlite3.Connection) -> None:
    """The tables, created; a file of another layout emptied first."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version != VERSION:
        for kind, name in db.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'trigger')"
            " AND name NOT LIKE 'sqlite_%'"
        ).fetchall():
            db.execute(f'DROP {kind} IF EXISTS "{name}"')  # names from the file itself
    db.executescript(_TABLES)
    db.execute(f"PRAGMA user_version = {VERSION}")


@dataclass(frozen=True)
class Waiting:
    stage: str
    pages: int
    since: float  # epoch seconds: the oldest page's arrival in that stage


# The columns of a DocumentRow, in its fields' order.
ROW = (
    "doc_id, tenant, pages_total, pages_done, status, submitted_at, updated_at, ended_at,"
    " result_sha256, answers"
)


@dataclass(frozen=True)
class DocumentRow:
    doc_id: str
    tenant: str | None
    pages_total: int
    pages_done: int | None
    status: str | None  # completed | partial | failed once ended
    submitted_at: float | None
    updated_at: float
    ended_at: float | None
    # The docs.results record's sha256: the record is in the blob store under it.
    result_sha256: str | None
    answers: str | None  # gateway/answers.py's Answers (JSON), once built

    @property
    def ended(self) -> bool:
        return self.result_sha256 is not None

    @property
    def state(self) -> Literal["submitted", "running", "ended"]:
        """Ended once its result is in; running once ingest has split it."""
        return "ended" if self.ended else "running" if self.pages_total else "submitted"


def write_progress(db: sqlite3.Connection, progress: Progress, now: float) -> str:
    at = progress.at.timestamp()
    db.execute(
        "INSERT INTO documents (doc_id, tenant, pages_total, updated_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (doc_id) DO UPDATE SET tenant = COALESCE(tenant, excluded.tenant),"
        " pages_total = MAX(pages_total, excluded.pages_total), updated_at = ?",
        (progress.doc_id, progress.tenant, progress.pages_total, now, now),
    )
    if progress.page_no is None:
        if progress.stage == "submitted":
            db.execute(
                "UPDATE documents SET submitted_at = COALESCE(submitted_at, ?) WHERE doc_id = ?",
                (at, progress.doc_id),
            )
        elif progress.pages_done is not None:
            db.execute(
                "UPDATE documents SET pages_done = ? WHERE doc_id = ?",
                (progress.pages_done, progress.doc_id),
            )
        return progress.doc_id
    # A page of an ended document (a late or redelivered record) is not waiting
    # anywhere; and a redelivered route record may say a done page moved: done stays.
    db.execute(
        "INSERT INTO pages SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM documents"
        " WHERE doc_id = ? AND result_sha256 IS NOT NULL) ON CONFLICT (doc_id, page_no)"
        " DO UPDATE SET stage = excluded.stage, at = excluded.at WHERE pages.stage != 'done'",
        (progress.doc_id, progress.page_no, progress.stage, at, progress.doc_id),
    )
    if progress.pages_done is not None:
        db.execute(
            "UPDATE documents SET pages_done = MAX(COALESCE(pages_done, 0), ?) WHERE doc_id = ?",
            (progress.pages_done, progress.doc_id),
        )
    return progress.doc_id


def write_result(
    db: sqlite3.Connection, result: DocumentResult, sha256: str, size: int, now: float
) -> str:
    """The document ended: its summary, and its result by reference (the record, `size`
    bytes, stored under `sha256`). A new result (the document ended again) drops the
    answers built from the one before."""
    done = sum(1 for p in result.pages if p.error is None) if result.pages else None
    db.execute(
        "INSERT INTO documents (doc_id, tenant, pages_total, pages_done, status, submitted_at,"
        " updated_at, ended_at, result_sha256, stored_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (doc_id) DO UPDATE SET tenant = COALESCE(tenant, excluded.tenant),"
        " pages_total = excluded.pages_total,"
        " pages_done = COALESCE(excluded.pages_done, pages_done), status = excluded.status,"
        " updated_at = excluded.updated_at, ended_at = excluded.ended_at,"
        " answers = CASE WHEN result_sha256 = excluded.result_sha256 THEN answers END,"
        " result_sha256 = excluded.result_sha256, stored_bytes = excluded.stored_bytes",
        (
            result.doc_id,
            result.tenant,
            result.page_count,
            done,
            result.status,
            result.submitted_at.timestamp(),
            now,
            result.completed_at.timestamp(),
            sha256,
            ROW_BYTES + size,
        ),
    )
    db.execute("DELETE FROM pages WHERE doc_id = ?", (result.doc_id,))
    return result.doc_id
