"""Real text and fonts installed on this machine, for pages that look like real uploads.

Texts: the docstrings of Python's standard library (PSF licence), the licence texts of
`/usr/share/common-licenses` and of the installed Python packages, and Debian's package
documentation (`/usr/share/doc/*`: copyright files, READMEs, NEWS, changelogs), each
under its own licence. Nothing is downloaded and nothing is copied into the repository:
pages are set from whatever is installed, so they are reproducible on one machine, not
across machines with other packages.

Fonts: PyMuPDF's built-in Base-14 faces (Helvetica, Times, Courier), DejaVu (Bitstream
Vera licence) when installed, and, when matplotlib is installed, the STIX (SIL OFL) and
Computer Modern (BSD-like, matplotlib's licence of the BaKoMa files) faces it ships.

Both are split in two by a stable hash of the source's path (texts) or by face
(fonts): `train` pages never use a `heldout` text or font, so a model trained on one
split can be checked on the other, on pages it has never seen the like of.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import random
import re
import sys
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

Split = Literal["train", "heldout"]
SPLITS: tuple[Split, ...] = ("train", "heldout")
# One source in HELDOUT_MODULUS goes to the held-out split.
HELDOUT_MODULUS = 6
MAX_SOURCE_BYTES = 400_000
DOC_DIR = Path("/usr/share/doc")
LICENSE_DIR = Path("/usr/share/common-licenses")
_DEJAVU_DIRS = (Path("/usr/share/fonts/truetype/dejavu"), Path("/usr/share/fonts/dejavu"),
                Path("/usr/share/fonts/TTF"))  # fmt: skip
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{1,}")


@dataclass(frozen=True)
class Face:
    """A font face for CSS: `css` is the font-family value; `file` is None for Base-14."""

    css: str
    file: Path | None = None
    mono: bool = False


@dataclass(frozen=True)
class Text:
    """What one source offers a page: prose paragraphs, raw lines and words."""

    name: str
    paragraphs: tuple[str, ...]
    lines: tuple[str, ...]
    words: tuple[str, ...]


def split_of(key: str) -> Split:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return "heldout" if int.from_bytes(digest[:4], "big") % HELDOUT_MODULUS == 0 else "train"


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py")) + sorted(root.glob("*/*.py"))
    return [f for f in files if not {"test", "tests", "idle_test", "site-packages"} & set(f.parts)]


def _package_licences() -> list[Path]:
    found: list[Path] = []
    for entry in sys.path:
        base = Path(entry)
        if base.name != "site-packages" or not base.is_dir():
            continue
        found.extend(sorted(base.glob("*.dist-info/LICEN[CS]E*")))
        found.extend(sorted(base.glob("*.dist-info/licenses/*")))
    return [f for f in found if f.is_file()]


def _doc_files() -> list[Path]:
    if not DOC_DIR.is_dir():
        return []
    patterns = ("copyright", "README*", "NEWS*", "changelog*")
    files = [f for pattern in patterns for f in DOC_DIR.glob(f"*/{pattern}")]
    return sorted(f for f in files if f.is_file() and f.suffix in {"", ".gz", ".txt", ".md"})


@cache
def sources(split: Split) -> tuple[Path, ...]:
    """Every installed text file of `split`, in a fixed order."""
    everything = [
        *_stdlib_files(),
        *(sorted(LICENSE_DIR.iterdir()) if LICENSE_DIR.is_dir() else []),
        *_package_licences(),
        *_doc_files(),
    ]
    return tuple(p for p in everything if split_of(p.name if p.parent == LICENSE_DIR
                                                   else str(p)) == split)  # fmt: skip


def _raw(path: Path) -> str:
    data = path.read_bytes()[:MAX_SOURCE_BYTES]
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(path.read_bytes())[:MAX_SOURCE_BYTES]
        except (OSError, EOFError):
            return ""
    text = data.decode("utf-8", errors="replace")
    if path.suffix == ".py":
        return "\n\n".join(_docstrings(text))
    return text


def _docstrings(code: str) -> list[str]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(
        n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]  # fmt: skip
    return [d for n in nodes if (d := ast.get_docstring(n))]


@cache
def read(path: Path) -> Text:
    raw = _raw(path).replace("\t", "    ")
    raw = "".join(ch for ch in raw if ch.isprintable() or ch == "\n")
    lines = tuple(line.rstrip() for line in raw.splitlines() if line.strip())
    blocks = re.split(r"\n\s*\n", raw)
    paragraphs = tuple(
        p for p in (" ".join(b.split()) for b in blocks) if len(p) >= 40 and _wordy(p)
    )
    words = tuple(_WORD.findall(raw))
    return Text(str(path), paragraphs, lines[:2000], words[:20000])


def _wordy(paragraph: str) -> bool:
    # Prose, not a table of symbols or a hex dump.
    letters = sum(ch.isalpha() or ch == " " for ch in paragraph)
    return letters >= 0.75 * len(paragraph)


def pick_text(rng: random.Random, split: Split, *, min_paragraphs: int = 4) -> Text:
    """A source of `split` with some prose; several are merged when one is too short."""
    pool = sources(split)
    if not pool:
        raise RuntimeError(f"no installed texts for the {split} split (see synth.corpus)")
    merged: list[Text] = []
    for _ in range(12):
        text = read(pool[rng.randrange(len(pool))])
        if text.paragraphs or text.lines:
            merged.append(text)
        if sum(len(t.paragraphs) for t in merged) >= min_paragraphs:
            break
    if not merged:
        raise RuntimeError(f"no readable texts for the {split} split")
    paragraphs = tuple(p for t in merged for p in t.paragraphs) or tuple(
        line for t in merged for line in t.lines
    )
    return Text(
        merged[0].name,
        paragraphs,
        tuple(line for t in merged for line in t.lines),
        tuple(w for t in merged for w in t.words) or ("text",),
    )


def _dejavu(name: str) -> Path | None:
    for directory in _DEJAVU_DIRS:
        if (directory / name).is_file():
            return directory / name
    return None


def _matplotlib_fonts() -> Path | None:
    for entry in sys.path:
        folder = Path(entry) / "matplotlib" / "mpl-data" / "fonts" / "ttf"
        if folder.is_dir():
            return folder
    return None


@cache
def faces(split: Split) -> tuple[Face, ...]:
    """Body-text faces of `split`; the held-out split falls back to the training faces
    when matplotlib's are not installed (held-out texts still differ)."""
    if split == "train":
        found = [Face("sans-serif"), Face("serif"), Face("monospace", mono=True)]
        dejavu = (("dvsans", "DejaVuSans.ttf"), ("dvcond", "DejaVuSansCondensed.ttf"),
                  ("dvserif", "DejaVuSerif.ttf"), ("dvmono", "DejaVuSansMono.ttf"))  # fmt: skip
        for css, name in dejavu:
            path = _dejavu(name)
            if path is not None:
                found.append(Face(css, path, mono=css == "dvmono"))
        return tuple(found)
    folder = _matplotlib_fonts()
    held: list[Face] = []
    if folder is not None:
        for css, name in (("stix", "STIXGeneral.ttf"), ("cmr", "cmr10.ttf"),
                          ("cmss", "cmss10.ttf"), ("cmtt", "cmtt10.ttf")):  # fmt: skip
            if (folder / name).is_file():
                held.append(Face(css, folder / name, mono=css == "cmtt"))
        serif_cond = _dejavu("DejaVuSerifCondensed.ttf")
        if serif_cond is not None:
            held.append(Face("dvserifcond", serif_cond))
    if not any(not f.mono for f in held):
        return faces("train")
    return tuple(held)
