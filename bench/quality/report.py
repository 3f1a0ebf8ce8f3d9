"""Scores and reports of bench.quality: each reader's outputs against the corpus'
checks, the summary table (Markdown) and the JSON report with every check's outcome."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.quality.checks import SCORED, Check, Outcome, cer, score
from bench.quality.corpus import Page
from bench.quality.run import PageRun, ReaderRun


@dataclass
class PageScore:
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # by check id
    cer: float | None = None


def score_page(run: PageRun, checks: list[Check], truths: dict[str, str]) -> PageScore:
    """A page without a result fails every check and has a character error of 1."""
    result = PageScore()
    for check in checks:
        if check.type == "cer":
            result.cer = 1.0 if run.markdown is None else cer(run.markdown, truths[check.truth])
        elif run.markdown is None:
            result.outcomes[check.id] = Outcome(False, f"no result: {run.error or run.status}")
        else:
            result.outcomes[check.id] = score(check, run.markdown)
    return result


@dataclass
class ReaderScore:
    reader: str
    description: str
    run: ReaderRun
    pages: dict[str, PageScore]

    def passed(self, checks: list[Check], kind: str | None = None) -> tuple[int, int]:
        chosen = [c for c in checks if c.type in SCORED and (kind is None or c.type == kind)]
        ok = sum(self.pages[c.page].outcomes[c.id].passed for c in chosen if c.page in self.pages)
        return ok, len(chosen)

    def cers(self, corpus: dict[str, Page], origin: str) -> list[float]:
        return [s.cer for p, s in self.pages.items()
                if s.cer is not None and corpus[p].origin == origin]  # fmt: skip

    def orientation(self, corpus: dict[str, Page]) -> dict[str, Any]:
        """Pages the orient stage saw: how many it set right, and which method decided."""
        seen = {p: r for p, r in self.run.pages.items() if r.rotation is not None}
        right = [p for p, r in seen.items() if r.rotation == corpus[p].expected_correction]
        turned = [p for p in seen if corpus[p].rotation]
        methods = Counter(r.orientation_method or "?" for r in seen.values())
        return {
            "pages": len(seen),
            "right": len(right),
            "methods": dict(methods),
            "turned_pages": len(turned),
            "turned_right": len(set(turned) & set(right)),
        }


def score_reader(reader: str, description: str, run: ReaderRun, checks: list[Check],
                 truths: dict[str, str]) -> ReaderScore:  # fmt: skip
    by_page: dict[str, list[Check]] = {}
    for c in checks:
        by_page.setdefault(c.page, []).append(c)
    pages = {p: score_page(r, by_page.get(p, []), truths) for p, r in run.pages.items()}
    return ReaderScore(reader, description, run, pages)


def _pct(ok: int, total: int) -> str:
    return f"{100 * ok / total:.0f} %" if total else "-"


def _cer_cell(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{100 * statistics.median(values):.1f} % / {100 * max(values):.1f} %"


def markdown_table(scores: list[ReaderScore], checks: list[Check], corpus: dict[str, Page]) -> str:
    head = ("| reader | checks passed | tables | headers/footers absent | reading order "
            "| text present | CER born-digital (median / worst) | CER scanned (median / worst) "
            "| pages/s |")  # fmt: skip
    rows = [head, "|" + "---|" * 9]
    for s in scores:
        cells = [f"`{s.reader}`", f"**{_pct(*s.passed(checks))}**"]
        for kind in ("table", "absent", "order", "present"):
            ok, total = s.passed(checks, kind)
            cells.append(f"{ok} of {total}")
        cells += [_cer_cell(s.cers(corpus, "digital")), _cer_cell(s.cers(corpus, "scan")),
                  f"{s.run.pages_per_s:.2f}"]  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def orientation_lines(scores: list[ReaderScore], corpus: dict[str, Page]) -> str:
    lines = []
    for s in scores:
        o = s.orientation(corpus)
        if o["pages"]:
            methods = ", ".join(f"{m} {n}" for m, n in sorted(o["methods"].items()))
            lines.append(f"- `{s.reader}`: orientation right on {o['right']} of {o['pages']} "
                         f"pages through the orient stage ({o['turned_right']} of "
                         f"{o['turned_pages']} turned scans); decided by: {methods}")  # fmt: skip
    return "\n".join(lines) + ("\n" if lines else "")


def write_report(out: Path, header: dict[str, Any], scores: list[ReaderScore],
                 checks: list[Check], corpus: dict[str, Page]) -> str:  # fmt: skip
    """quality.md (the table), quality.json (every check's outcome per reader and page) and
    markdown/<reader>/<page>.md (what each reader wrote); returns the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    intro = (
        f"`{header['command']}`: {header['pages']} pages, {header['checks']} checks; "
        f"ground truth for character error on {header['cer_pages']} of the pages."
    )
    table = markdown_table(scores, checks, corpus)
    text = f"# Reading quality, {header['date']}\n\n{intro}\n\n{table}\n"
    text += orientation_lines(scores, corpus)
    (out / "quality.md").write_text(text)
    by_id = {c.id: c for c in checks}
    readers: dict[str, Any] = {}
    for s in scores:
        pages: dict[str, Any] = {}
        for page_id, page_score in sorted(s.pages.items()):
            run = s.run.pages[page_id]
            pages[page_id] = {
                **{k: v for k, v in asdict(run).items() if k != "markdown"},
                "kind": corpus[page_id].kind, "origin": corpus[page_id].origin,
                "cer": page_score.cer,
                "checks": [{"id": cid, "type": by_id[cid].type, "passed": o.passed, "why": o.why}
                           for cid, o in page_score.outcomes.items()],
            }  # fmt: skip
            md_dir = out / "markdown" / s.reader
            md_dir.mkdir(parents=True, exist_ok=True)
            (md_dir / f"{page_id}.md").write_text(run.markdown or "")
        summary = {kind: dict(zip(("passed", "total"), s.passed(checks, kind), strict=True))
                   for kind in SCORED}  # fmt: skip
        readers[s.reader] = {
            "description": s.description, "seconds": round(s.run.seconds, 1),
            "pages_per_s": round(s.run.pages_per_s, 3),
            "passed": dict(zip(("passed", "total"), s.passed(checks), strict=True)),
            "by_kind": summary,
            "cer_digital": s.cers(corpus, "digital"), "cer_scan": s.cers(corpus, "scan"),
            "orientation": s.orientation(corpus), "pages": pages,
        }  # fmt: skip
    (out / "quality.json").write_text(json.dumps({**header, "readers": readers}, indent=1) + "\n")
    return text
