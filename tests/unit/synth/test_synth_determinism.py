from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from synth.dataset import generate, write_dataset
from synth.doctypes import DOC_TYPES, ROTATIONS

W = 200


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_write_dataset_is_byte_identical(tmp_path: Path) -> None:
    a = write_dataset(tmp_path / "a", 10, seed=123, width=W, n_pdfs=2, pdf_pages=2)
    write_dataset(tmp_path / "b", 10, seed=123, width=W, n_pdfs=2, pdf_pages=2)
    write_dataset(tmp_path / "c", 10, seed=124, width=W, n_pdfs=2, pdf_pages=2)
    da, db, dc = (_tree_digest(tmp_path / x) for x in "abc")
    assert da == db
    assert da.keys() == dc.keys() and da != dc
    assert a.n_images == 10 and a.n_pdfs == 2 and a.n_pdf_pages == 4


def test_generate_is_prefix_stable() -> None:
    short = [d.image.tobytes() for d in generate(8, 3, width=W)]
    long = [d.image.tobytes() for d in generate(8, 9, width=W)]
    assert long[:3] == short


def test_types_and_rotations_balanced() -> None:
    docs = list(generate(0, len(DOC_TYPES) * len(ROTATIONS), width=64))
    pairs = Counter((d.doc_type, d.rotation) for d in docs)
    assert set(pairs) == {(t, r) for t in DOC_TYPES for r in ROTATIONS}
    assert set(pairs.values()) == {1}


def test_manifest_and_folders(tmp_path: Path) -> None:
    summary = write_dataset(
        tmp_path, 12, seed=1, doc_types=["rg_front", "letter"], rotations=[0, 90], width=W,
        n_pdfs=1, pdf_pages=2,
    )  # fmt: skip
    rows = [json.loads(line) for line in summary.manifest.read_text().splitlines()]
    assert summary.per_class == {"letter": 6, "rg_front": 6}
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == ["letter", "rg_front"]
    for row in rows:
        assert set(row) == {"path", "doc_type", "rotation", "page_no", "fields"}
        assert row["rotation"] in (0, 90)
        assert (tmp_path / row["path"]).is_file()
    images = [r for r in rows if r["page_no"] is None]
    pdf_rows = [r for r in rows if r["page_no"] is not None]
    assert len(images) == 12 and all(r["path"].endswith(".jpg") for r in images)
    assert [r["page_no"] for r in pdf_rows] == [1, 2]
    assert {r["doc_type"] for r in pdf_rows} <= {"rg_front", "letter"}


def test_logs_counts_never_values(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="synth")
    write_dataset(tmp_path, 8, seed=5, width=W, n_pdfs=1, pdf_pages=2)
    rows = [json.loads(x) for x in (tmp_path / "ground_truth.jsonl").read_text().splitlines()]
    values = {v for r in rows for v in r["fields"].values() if len(v) > 3}
    assert caplog.records, "expected a summary log line"
    for record in caplog.records:
        message = record.getMessage()
        assert not any(v in message for v in values)


@pytest.mark.parametrize(
    "kwargs", [{"doc_types": []}, {"rotations": []}, {"rotations": [45]}, {"doc_types": ["x"]}]
)
def test_bad_arguments_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        list(generate(0, 1, width=W, **kwargs))  # type: ignore[arg-type]
