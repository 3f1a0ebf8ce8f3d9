from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from pathlib import Path

import pymupdf
import pytest
from PIL import Image
from typer.testing import CliRunner

from schemas import DocumentSubmitted, Operation, Options, decode, headers
from streams.blobs import BlobStore
from streams.cli import app
from streams.client import submit
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import RAW, Topology

pytestmark = pytest.mark.kafka


def _png(path: Path, size: tuple[int, int] = (64, 48), noise: bool = False) -> bytes:
    img = Image.new("RGB", size, "white")
    if noise:  # incompressible, so the file exceeds the inline limit
        img = Image.frombytes("RGB", size, random.Random(1).randbytes(size[0] * size[1] * 3))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


def _pdf(path: Path, pages: int) -> bytes:
    doc = pymupdf.open()
    for i in range(pages):
        doc.new_page().insert_text((72, 72), f"page {i + 1}")
    data: bytes = doc.tobytes()
    path.write_bytes(data)
    return data


def _read_raw(
    settings: Settings, expected: int
) -> list[tuple[bytes, DocumentSubmitted, dict[str, bytes]]]:
    topic = Topology(settings.topics.prefix).name(RAW)
    cons = kafka.consumer(settings.kafka, f"{settings.topics.prefix}reader")
    cons.subscribe([topic])
    got = []
    try:
        for _ in range(200):
            msg = cons.poll(0.2)
            if msg is None or msg.error():
                if len(got) >= expected:
                    break
                continue
            hdrs = {k: v for k, v in (msg.headers() or [])}
            got.append((msg.key(), decode(DocumentSubmitted, msg.value()), hdrs))
    finally:
        cons.close()
    return got


@pytest.fixture
def raw_topic(settings: Settings, make_topic: Callable[[str, int], str]) -> str:
    return make_topic(Topology(settings.topics.prefix).name(RAW), 3)


def test_submit_image_pdf_and_folder(settings: Settings, raw_topic: str, tmp_path: Path) -> None:
    img_bytes = _png(tmp_path / "card.png")
    pdf_bytes = _pdf(tmp_path / "two-pages.pdf", 2)
    folder = tmp_path / "batch"
    (folder / "nested").mkdir(parents=True)
    big = _png(folder / "nested" / "big.png", size=(200, 200), noise=True)
    _png(folder / "small.png", size=(10, 10))
    (folder / "notes.txt").write_text("ignored: not a document extension")

    subs = submit.submit_paths(
        settings,
        [tmp_path / "card.png", tmp_path / "two-pages.pdf", folder],
        operation=Operation.ocr,
        options=Options(max_pages=5),
    )
    assert [s.path.name for s in subs if s.path] == [
        "card.png",
        "two-pages.pdf",
        "big.png",
        "small.png",
    ]
    assert len(big) > settings.blobs.inline_limit_bytes
    assert [s.via for s in subs] == ["inline", "inline", "blob", "inline"]

    records = _read_raw(settings, 4)
    by_id = {r.doc_id: (key, r, hdrs) for key, r, hdrs in records}
    assert set(by_id) == {s.doc_id for s in subs}
    key, card, hdrs = by_id[subs[0].doc_id]
    assert key == subs[0].doc_id.encode()
    assert card.operation is Operation.ocr and card.options.max_pages == 5
    assert card.payload.inline_bytes() == img_bytes
    assert card.payload.media_type == "image/png"
    assert hdrs[headers.SCHEMA] == b"DocumentSubmitted/1"
    assert len(hdrs[headers.EVENT_ID]) == 36 and hdrs[headers.TRACEPARENT].startswith(b"00-")
    assert by_id[subs[1].doc_id][1].payload.inline_bytes() == pdf_bytes

    # The large one travels as a claim check; the blob store returns the same bytes.
    _, big_rec, _ = by_id[subs[2].doc_id]
    assert big_rec.payload.inline_base64 is None and big_rec.payload.uri
    store = BlobStore(settings.blobs.root)
    assert store.get(big_rec.payload.uri, expected_sha256=big_rec.payload.sha256) == big


def test_doc_id_is_stable_for_same_bytes_and_options(tmp_path: Path) -> None:
    data = _png(tmp_path / "a.png")
    a = submit.stable_doc_id(data, Operation.process, Options())
    assert a == submit.stable_doc_id(data, Operation.process, Options())
    assert a != submit.stable_doc_id(data, Operation.classify, Options())
    assert a != submit.stable_doc_id(data, Operation.process, Options(dpi=200))
    assert a != submit.stable_doc_id(data + b"\0", Operation.process, Options())


def test_submit_cli_json_and_explicit_doc_id(
    cli_env: Settings, raw_topic: str, tmp_path: Path
) -> None:
    _png(tmp_path / "one.png")
    result = CliRunner().invoke(
        app,
        [
            "submit",
            str(tmp_path / "one.png"),
            "--operation",
            "classify",
            "--no-auto-rotate",
            "--doc-id",
            "client-key-1",
            "--attr",
            "tenant=acme",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert row["doc_id"] == "client-key-1"
    ((_, rec, _),) = _read_raw(cli_env, 1)
    assert rec.doc_id == "client-key-1" and rec.options.auto_rotate is False
    assert rec.attributes == {"tenant": "acme"}


def test_submit_cli_rejects_missing_path_and_bad_doc_id(cli_env: Settings, tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["submit", str(tmp_path / "nope.png")])
    assert missing.exit_code == 2
    assert "no such file or folder" in missing.output
    _png(tmp_path / "x.png")
    bad = runner.invoke(app, ["submit", str(tmp_path / "x.png"), "--doc-id", "../etc/passwd"])
    assert bad.exit_code != 0
    assert "doc_id" in bad.output
