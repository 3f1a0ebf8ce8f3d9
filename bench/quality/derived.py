"""Pages made here from the corpus' own born-digital table pages, with their checks:

- `scan_<page>`: a synthetic scan (rendered at 200 dpi in grey, turned by a fraction of
  a degree, blurred, speckled, saved as JPEG at quality 75): a table
  page read from its pixels;
- `rotate_<page>`: the page set landscape through its `/Rotate` entry (90 degrees);
- `sideways_<page>`: the page printed turned on an upright page (its content drawn at
  270 degrees on a landscape sheet, the text matrix turned, no `/Rotate`).

Each keeps the table checks (and text checks) of its source page, with ids
`derived:<new page>_<n>`. Run once, output committed:
`python -m bench.quality.derived` writes the files into data/pages/ and appends the
pages and checks to data/pages.jsonl and data/checks.jsonl (pages already there are
left alone). Deterministic (the PDFs' file identifiers aside): the noise is seeded by the
page's name.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image, ImageFilter

from bench.quality.corpus import CORPUS
from synth.layout_pages import sideways

SCANS = ("olm_earnings", "dl_redp5110_p8", "dl_odf_table", "olm_olmo2_pg4")
ROTATED = ("dl_redp5110_p9",)
SIDEWAYS = ("olm_earnings",)
_KEPT_TYPES = ("table", "present")


def scanned(pdf: bytes, name: str) -> bytes:
    """A synthetic scan of the PDF's first page, as JPEG bytes."""
    rng = np.random.default_rng(int(hashlib.sha256(name.encode()).hexdigest()[:8], 16))
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        pix = doc[0].get_pixmap(dpi=200, colorspace=pymupdf.csGRAY)
        image = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    image = image.rotate(float(rng.uniform(-0.6, 0.6)), resample=Image.Resampling.BICUBIC,
                         expand=False, fillcolor=255)  # fmt: skip
    image = image.filter(ImageFilter.GaussianBlur(0.7))
    pixels = np.asarray(image, dtype=np.float32)
    pixels += rng.normal(0, 8, pixels.shape)
    speckle = rng.random(pixels.shape) < 0.0015
    pixels[speckle] = rng.uniform(0, 120, int(speckle.sum()))
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=75)
    return out.getvalue()


def main(root: Path = CORPUS) -> None:
    pages = [json.loads(ln) for ln in (root / "pages.jsonl").read_text().splitlines()]
    checks = [json.loads(ln) for ln in (root / "checks.jsonl").read_text().splitlines() if ln]
    known = {p["id"] for p in pages}
    files = {p["id"]: p["file"] for p in pages}
    made: list[tuple[str, str, bytes, str, str]] = []
    for source in SCANS:
        data = scanned((root / files[source]).read_bytes(), f"scan_{source}")
        made.append((f"scan_{source}", source, data, "jpg", "scan"))
    for source in ROTATED:
        turned = sideways((root / files[source]).read_bytes(), rotate_entry=True)
        made.append((f"rotate_{source}", source, turned, "pdf", "digital"))
    for source in SIDEWAYS:
        made.append((f"sideways_{source}", source,
                     sideways((root / files[source]).read_bytes()), "pdf", "digital"))  # fmt: skip
    new_pages, new_checks = [], []
    for page_id, source, data, ext, origin in made:
        if page_id in known:
            continue
        (root / "pages" / f"{page_id}.{ext}").write_bytes(data)
        new_pages.append({"id": page_id, "file": f"pages/{page_id}.{ext}", "kind": "table",
                          "origin": origin, "rotation": 0})  # fmt: skip
        kept = [c for c in checks if c["page"] == source and c["type"] in _KEPT_TYPES]
        for n, check in enumerate(kept):
            new_checks.append({**check, "id": f"derived:{page_id}_{n:02d}", "page": page_id})
    with (root / "pages.jsonl").open("a") as f:
        f.writelines(json.dumps(p) + "\n" for p in new_pages)
    with (root / "checks.jsonl").open("a") as f:
        f.writelines(json.dumps(c) + "\n" for c in new_checks)
    print(f"{len(new_pages)} pages, {len(new_checks)} checks added")


if __name__ == "__main__":
    main()
