"""The soak's load and its ledger: ordinary documents, generated hostile submissions,
and what became of each one (a result on docs.results, or a dead letter of it)."""

from __future__ import annotations

import io
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Message
from hypothesis import strategies as st

from bench.hostile_records import (
    DOC,
    OVER_LIMIT_PRODUCER_CONFIG,
    drawn,
    fill,
    headers,
    submissions,
)
from bench.hostile_records import text_pdf as fuzz_pdf
from schemas import DocumentResult, Operation, Options, RecordError, decode
from schemas import headers as h
from streams.blobs import BlobStore
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DLQ, RAW, RESULTS

Coordinates = tuple[str, int, int]
Headers = list[tuple[str, str | bytes | None]]
# What the producer takes at most (the broker's default): a drawn record past it would
# never reach the pipeline, so it is not drawn into the load.
_PRODUCER_MAX = OVER_LIMIT_PRODUCER_CONFIG["message.max.bytes"]


@dataclass(frozen=True)
class Ordinary:
    kind: str  # "ocr" (a born-digital page, its text layer read by ingest) or "classify"
    data: bytes
    operation: Operation
    options: Options


def ordinary_documents(seed_: int) -> list[Ordinary]:
    """Born-digital one-page reports (operation ocr: answered on the CPU from the text
    layer) and small upright ID pages (classify: the GPU node's page model)."""
    from synth.dataset import generate
    from synth.pdf import report_pages, text_pdf

    docs = [Ordinary("ocr", text_pdf(report_pages(seed_ + k, 1)), Operation.ocr,
                     Options(auto_rotate=False)) for k in range(12)]  # fmt: skip
    for doc in generate(seed_, 8, rotations=[0], width=320):
        buf = io.BytesIO()
        doc.image.save(buf, format="PNG")
        docs.append(Ordinary("classify", buf.getvalue(), Operation.classify, Options()))
    return docs


def hostile_submissions(
    n: int, limit: int, store: BlobStore, from_seed: int
) -> list[tuple[bytes, Headers]]:
    """`n` generated submissions for docs.raw (the fuzzer's, any operation, sized around
    the record limit `limit`, with hostile headers), each still holding the `DOC`
    placeholder for its doc_id. A record without a doc_id gets the placeholder too: ingest
    would name it by its content, and two alike would be one document."""
    blob = store.put(fuzz_pdf("short"))
    out: list[tuple[bytes, Headers]] = []
    strategy = st.tuples(submissions(limit), headers(limit))
    batch = 0
    while len(out) < n:
        for raw, extra in drawn(strategy, 50, from_seed + batch):
            value = raw.replace(b'{"doc_id": null', b'{"doc_id": "' + DOC.encode() + b'"', 1)
            value = fill(value, root=store.root, blob=blob.uri, blob_sha=blob.sha256, doc_id=DOC)
            if len(value) + sum(len(k) + len(v) for k, v in extra) < _PRODUCER_MAX:
                out.append((value, list(extra)))
        batch += 1
    return out[:n]


@dataclass
class Ledger:
    """Every document submitted and how it ended, read from docs.results and docs.dlq.
    Counted as things arrive: the sampler's thread reads the counts while they change."""

    kinds: dict[str, str] = field(default_factory=dict)  # doc_id -> ocr | classify | hostile
    submitted_at: dict[str, float] = field(default_factory=dict)  # monotonic, once accepted
    where: dict[Coordinates, str] = field(default_factory=dict)  # a hostile record -> doc_id
    refused: dict[str, str] = field(default_factory=dict)  # hostile the producer refused
    statuses: dict[str, list[str]] = field(default_factory=dict)  # doc_id -> result statuses
    lettered: set[Coordinates] = field(default_factory=set)  # records that were dead-lettered
    ended_ids: set[str] = field(default_factory=set)
    letters_by_stage: Counter[str] = field(default_factory=Counter)
    unreadable_results: int = 0

    @property
    def submitted(self) -> int:
        return len(self.submitted_at)

    def counts(self) -> dict[str, float]:
        submitted, ended = len(self.submitted_at), len(self.ended_ids)
        return {"submitted": submitted, "ended": ended, "in flight": submitted - ended}

    def accepted(self, doc_id: str, where: Coordinates | None = None) -> None:
        self.submitted_at[doc_id] = time.monotonic()
        if where is not None:
            self.where[where] = doc_id
            if where in self.lettered:
                self.ended_ids.add(doc_id)

    def result(self, doc_id: str, status: str) -> None:
        self.statuses.setdefault(doc_id, []).append(status)
        if doc_id in self.kinds:
            self.ended_ids.add(doc_id)

    def letter(self, source: Coordinates) -> None:
        self.lettered.add(source)
        doc_id = self.where.get(source)
        if doc_id is not None:
            self.ended_ids.add(doc_id)

    def open(self) -> list[str]:
        """Submitted and not ended, oldest first."""
        return sorted(set(self.submitted_at) - self.ended_ids, key=self.submitted_at.__getitem__)

    def summary(self) -> dict[str, Any]:
        by_kind: dict[str, Counter[str]] = {}
        for doc_id in self.submitted_at:
            kind = self.kinds[doc_id]
            statuses = self.statuses.get(doc_id)
            if statuses:
                outcome = statuses[0]
            elif doc_id in self.ended_ids:
                outcome = "dead letter"
            else:
                outcome = "not ended"
            by_kind.setdefault(kind, Counter())[outcome] += 1
        return {
            "submitted": self.submitted,
            "ended": len(self.ended_ids),
            "refused_by_the_producer": len(self.refused),
            "outcomes": {kind: dict(c) for kind, c in sorted(by_kind.items())},
            "ended_more_than_once": sorted(d for d, s in self.statuses.items() if len(s) > 1),
            "dead_letters_by_stage": dict(self.letters_by_stage),
            "unreadable_results": self.unreadable_results,
        }


class Load:
    """Submits the load (ordinary documents through the project's Submitter, hostile
    records through a plain producer that allows records past the pipeline's limit) and
    reads what ends them."""

    def __init__(self, settings: Settings, ordinary: list[Ordinary],
                 hostile: list[tuple[bytes, Headers]], hostile_share: float,
                 classify_share: float) -> None:  # fmt: skip
        self.topo = settings.topology
        self.ordinary = ordinary
        self.hostile = hostile
        self.ledger = Ledger()
        self.submitter = Submitter(settings)
        self.raw = kafka.producer(settings.kafka, **OVER_LIMIT_PRODUCER_CONFIG)
        self.reader = kafka.consumer(settings.kafka, f"soak-reader-{uuid.uuid4().hex[:8]}")
        self.reader.subscribe([self.topo.name(RESULTS), self.topo.name(DLQ)])
        self.run = uuid.uuid4().hex[:6]
        self.count = 0
        self.hostile_every = round(1 / hostile_share) if hostile_share > 0 else 0
        self.classify_every = round(1 / classify_share) if classify_share > 0 else 0
        self._by_kind = {k: [d for d in ordinary if d.kind == k] for k in ("ocr", "classify")}

    def submit_next(self) -> None:
        """The next document of the schedule: every `hostile_every`-th a generated record
        (while any are left), every `classify_every`-th ordinary one a classify."""
        n = self.count
        self.count += 1
        if self.hostile_every and n % self.hostile_every == self.hostile_every - 1:
            k = n // self.hostile_every
            if k < len(self.hostile):
                self._submit_hostile(f"hostile-{self.run}-{k:05d}", *self.hostile[k])
                return
        kind = "classify" if self.classify_every and n % self.classify_every == 0 else "ocr"
        pool = self._by_kind[kind] or self.ordinary
        self.submit_ordinary(f"{kind}-{self.run}-{n:06d}", pool[n % len(pool)])

    def submit_ordinary(self, doc_id: str, doc: Ordinary) -> None:
        self.ledger.kinds[doc_id] = doc.kind
        self.ledger.accepted(doc_id)
        self.submitter.submit_bytes(doc.data, operation=doc.operation, options=doc.options,
                                    doc_id=doc_id)  # fmt: skip

    def _submit_hostile(self, doc_id: str, value: bytes, extra: Headers) -> None:
        self.ledger.kinds[doc_id] = "hostile"
        value = value.replace(DOC.encode(), doc_id.encode())
        self.raw.produce(self.topo.name(RAW), value, doc_id.encode(), headers=extra,
                         on_delivery=self._acknowledged(doc_id))  # fmt: skip
        self.raw.poll(0)

    def _acknowledged(self, doc_id: str) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self.ledger.refused[doc_id] = err.name()
                return
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None
            self.ledger.accepted(doc_id, (topic, partition, offset))

        return report

    def read(self, timeout_s: float) -> int:
        """Takes in what docs.results and docs.dlq have now; returns how many records."""
        self.raw.poll(0)
        batch = self.reader.consume(500, timeout_s)
        dlq = self.topo.name(DLQ)
        for msg in batch:
            value = msg.value()
            if msg.error() is not None:
                continue
            if msg.topic() == dlq:
                got = msg.headers() or []
                pairs = got.items() if isinstance(got, dict) else got
                hs = {k: v for k, v in pairs if isinstance(v, bytes)}
                stage = hs.get(h.ERROR_STAGE, b"?").decode(errors="replace")
                self.ledger.letters_by_stage[stage] += 1
                try:
                    source = (hs[h.ERROR_TOPIC].decode(), int(hs[h.ERROR_PARTITION]),
                              int(hs[h.ERROR_OFFSET]))  # fmt: skip
                except (KeyError, ValueError):
                    continue
                self.ledger.letter(source)
                continue
            try:
                result = decode(DocumentResult, value or b"")
            except RecordError:
                self.ledger.unreadable_results += 1
                continue
            self.ledger.result(result.doc_id, result.status)
        return len(batch)

    def flush(self) -> None:
        self.submitter.flush(120)
        self.raw.flush(120)

    def close(self) -> None:
        self.reader.close()
        # The producers go now, while the broker is up: left to the garbage collector they
        # would log failed reconnects after the broker stops.
        del self.submitter, self.raw
