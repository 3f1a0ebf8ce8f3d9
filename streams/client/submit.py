"""Publish documents to docs.raw: the producer side of the pipeline, through the intake
the gateway uses too (intake.py).

Small payloads travel inline (base64); larger ones go to the blob store and the
record carries only their URI (claim check). The doc_id defaults to a hash of
the bytes, the operation and the options, so submitting the same file twice
names the same document and downstream dedupe can recognise it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from confluent_kafka import KafkaError, Message

from schemas import DocumentSubmitted, Operation, Options, validate
from streams.blobs import BlobStore
from streams.client.intake import Intake
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import Topology

MEDIA_TYPES = {
    ".pdf": "application/pdf",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".bmp": "image/bmp",
    ".webp": "image/webp",
}


class SubmitError(RuntimeError):
    pass


@dataclass(frozen=True)
class Submission:
    path: Path | None
    doc_id: str
    size_bytes: int
    via: Literal["inline", "blob"]


def discover(paths: Iterable[Path]) -> list[Path]:
    """Files named explicitly are always taken (ingest judges them); folders are
    walked recursively, in a stable order, for files with a known extension."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file() and p.suffix.lower() in MEDIA_TYPES
            )
        elif path.is_file():
            found.append(path)
        else:
            raise SubmitError(f"{path}: no such file or folder")
    return found


def stable_doc_id(data: bytes, operation: Operation, options: Options) -> str:
    h = hashlib.sha256(data)
    h.update(b"\0")
    h.update(
        json.dumps([operation.value, options.model_dump(mode="json")], sort_keys=True).encode()
    )
    return h.hexdigest()[:32]


class Submitter:
    """Submits documents; one producer and blob store for any number of them."""

    def __init__(self, settings: Settings, topology: Topology | None = None) -> None:
        self._settings = settings
        self._intake = Intake(settings, topology)
        self._producer = kafka.producer(settings.kafka)
        self._store = BlobStore.from_settings(settings.blobs)
        self._errors: list[str] = []

    def submit_bytes(
        self,
        data: bytes,
        *,
        operation: Operation = Operation.process,
        options: Options | None = None,
        doc_id: str | None = None,
        filename: str | None = None,
        media_type: str | None = None,
        callback: str | None = None,
        attributes: dict[str, str | int | float | bool | None] | None = None,
        tenant: str | None = None,
    ) -> Submission:
        options = options or Options()
        doc_id = doc_id or stable_doc_id(data, operation, options)
        sha = hashlib.sha256(data).hexdigest()
        via: Literal["inline", "blob"]
        if len(data) <= self._settings.blobs.inline_limit_bytes:
            via, content = "inline", {"inline_base64": base64.b64encode(data).decode()}
        else:
            via, content = "blob", {"uri": self._store.put(data).uri}
        record = validate(
            DocumentSubmitted,
            self._intake.fields(
                doc_id,
                {
                    **content,
                    "sha256": sha,
                    "size_bytes": len(data),
                    "media_type": media_type,
                    "filename": filename,
                },
                operation=operation,
                options=options,
                callback=callback,
                attributes=attributes,
                tenant=tenant,
            ),
        )
        out = self._intake.outgoing(record)  # RecordTooLargeError before a client refuses it
        self._producer.produce(
            out.topic,
            key=out.key,
            value=out.value,
            headers=list(out.headers),
            on_delivery=self._on_delivery,
        )
        self._producer.poll(0)
        return Submission(None, doc_id, len(data), via)

    def submit_file(self, path: Path, **kwargs: object) -> Submission:
        data = path.read_bytes()
        sub = self.submit_bytes(
            data,
            filename=path.name,
            media_type=MEDIA_TYPES.get(path.suffix.lower()),
            **kwargs,  # type: ignore[arg-type]
        )
        return Submission(path, sub.doc_id, sub.size_bytes, sub.via)

    def flush(self, timeout: float = 60.0) -> None:
        """Wait for every record to be acknowledged; raise if any was not."""
        if self._producer.flush(timeout) > 0:
            raise SubmitError(f"{len(self._producer)} records not acknowledged after {timeout}s")
        if self._errors:
            errors, self._errors = self._errors, []
            raise SubmitError(f"{len(errors)} records failed: {errors[0]}")

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._errors.append(f"{msg.topic()}: {err.str()}")


def submit_paths(
    settings: Settings,
    paths: Sequence[Path],
    *,
    on_each: Callable[[Submission], None] | None = None,
    **kwargs: object,
) -> list[Submission]:
    files = discover(paths)
    if kwargs.get("doc_id") and len(files) != 1:
        raise SubmitError("--doc-id names one document; give exactly one file")
    submitter = Submitter(settings)
    done = []
    for path in files:
        sub = submitter.submit_file(path, **kwargs)
        done.append(sub)
        if on_each:
            on_each(sub)
    submitter.flush()
    return done
