"""The corpus under data/: its pages, checks and ground-truth texts, read and
cross-checked, and a short trial's choice of pages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.quality.checks import Check

CORPUS = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Page:
    """A page of the corpus (a line of data/pages.jsonl)."""

    id: str
    file: str
    kind: str  # paper, table, form, book, scan, handwritten, rotated, report, other
    origin: str  # digital (a PDF with its own text) or scan (pixels only, or an OCR layer)
    rotation: int = 0  # clockwise quarter turns given to an upright scan, in degrees

    @property
    def expected_correction(self) -> int:
        """The clockwise correction that makes the page upright again."""
        return (360 - self.rotation) % 360


def load_corpus(root: Path = CORPUS) -> tuple[list[Page], list[Check], dict[str, str]]:
    """Pages, checks and ground-truth texts (by their path under `root`), cross-checked."""
    pages = [Page(**json.loads(ln)) for ln in (root / "pages.jsonl").read_text().splitlines()]
    checks = [Check.from_json(json.loads(ln))
              for ln in (root / "checks.jsonl").read_text().splitlines() if ln.strip()]  # fmt: skip
    ids = {p.id for p in pages}
    for page in pages:
        if not (root / page.file).is_file():
            raise FileNotFoundError(f"{page.id}: {page.file} missing under {root}")
    seen: set[str] = set()
    for check in checks:
        if check.page not in ids:
            raise ValueError(f"check {check.id}: no page {check.page!r} in pages.jsonl")
        if check.id in seen:
            raise ValueError(f"check {check.id} appears twice")
        seen.add(check.id)
    truths = {c.truth: (root / c.truth).read_text() for c in checks if c.type == "cer"}
    return pages, checks, truths


def spread(pages: list[Page], n: int | None) -> list[Page]:
    """The first `n` pages taking each kind in turn, so a short trial sees every kind."""
    if n is None or n >= len(pages):
        return pages
    by_kind: dict[str, list[Page]] = {}
    for page in pages:
        by_kind.setdefault(page.kind, []).append(page)
    chosen: list[Page] = []
    while len(chosen) < n:
        for group in by_kind.values():
            if group and len(chosen) < n:
                chosen.append(group.pop(0))
    return chosen
