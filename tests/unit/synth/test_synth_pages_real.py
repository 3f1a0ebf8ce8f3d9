"""Pages like real uploads: every kind renders upright, deterministically, and the
held-out split shares no text and no face with the training split."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from synth import corpus
from synth.dataset import write_dataset
from synth.pages_real import DRAWN, KINDS, LAYOUTS, page_rng, render_real_page, write_real_pages


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_renders_a_page_with_something_on_it(kind: str) -> None:
    page = render_real_page(page_rng(11, 0, "train"), "train", kind)
    assert page.kind == kind
    grey = np.asarray(page.image.convert("L"), dtype=np.float32)
    assert min(page.image.size) >= 200
    assert grey.std() > 5  # text, rules or strokes: not a blank sheet


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_kinds_are_drawn_by_weight() -> None:
    assert set(KINDS) == set(LAYOUTS) | set(DRAWN)
    kinds = [render_real_page(page_rng(4, i, "train")).kind for i in range(40)]
    assert len(set(kinds)) >= 8
    with pytest.raises(ValueError, match="no page kind 'selfie'"):
        render_real_page(page_rng(4, 0, "train"), "train", "selfie")


def test_same_seed_same_pixels() -> None:
    a = render_real_page(page_rng(3, 5, "train"), "train").image.tobytes()
    b = render_real_page(page_rng(3, 5, "train"), "train").image.tobytes()
    c = render_real_page(page_rng(3, 6, "train"), "train").image.tobytes()
    assert a == b != c


def test_held_out_split_shares_no_text_and_no_face() -> None:
    train, held = corpus.sources("train"), corpus.sources("heldout")
    assert train and held and not set(train) & set(held)
    assert {f.css for f in corpus.faces("train")}.isdisjoint(
        {f.css for f in corpus.faces("heldout")}
    ) or corpus.faces("heldout") == corpus.faces("train")  # no held-out faces installed
    assert corpus.split_of("same key") == corpus.split_of("same key")
    text = corpus.pick_text(random.Random(0), "heldout")
    assert Path(text.name) in held and text.paragraphs and text.words


def test_written_pages_join_the_dataset_as_upright_unknown_pages(tmp_path: Path) -> None:
    write_dataset(tmp_path, n=4, seed=1, doc_types=["rg_front", "unknown"], rotations=(0,),
                  width=160, n_pdfs=0)  # fmt: skip
    counts = write_real_pages(tmp_path, 3, seed=2)
    assert sum(counts.values()) == 3
    rows = [json.loads(line) for line in (tmp_path / "ground_truth.jsonl").read_text().splitlines()]
    real = [r for r in rows if r.get("kind", "").startswith("real:")]
    assert len(rows) == 7 and len(real) == 3
    assert all(r["doc_type"] == "unknown" and r["rotation"] == 0 for r in real)
    assert all((tmp_path / r["path"]).is_file() for r in real)
