"""`python -m synth OUT_DIR [-n N] [--seed S] [--width W]`: write a dataset, print counts."""

from __future__ import annotations

import argparse
import logging
import time

from synth.dataset import write_dataset
from synth.doctypes import DEFAULT_WIDTH, DOC_TYPES


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m synth", description=__doc__)
    parser.add_argument("out_dir")
    parser.add_argument("-n", type=int, default=len(DOC_TYPES) * 4, help="number of images")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=DEFAULT_WIDTH)
    parser.add_argument("--pdfs", type=int, default=3, help="number of multi-page PDFs")
    parser.add_argument("--pdf-pages", type=int, default=3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    summary = write_dataset(
        args.out_dir,
        args.n,
        args.seed,
        width=args.width,
        n_pdfs=args.pdfs,
        pdf_pages=args.pdf_pages,
    )
    # Counts only: field values imitate personal data.
    print(
        f"{summary.n_images} images {summary.per_class}, {summary.n_pdfs} PDFs "
        f"({summary.n_pdf_pages} pages) in {time.perf_counter() - start:.1f}s"
    )


if __name__ == "__main__":
    main()
