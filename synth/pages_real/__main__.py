"""`python -m synth.pages_real`: write upright pages into a dataset (see the package's
docstring)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import synth.pages_real
from synth.pages_real.pages import write_real_pages
from synth.pages_real.setting import LONG_SIDE


def main(argv: list[str] | None = None) -> None:
    summary = (synth.pages_real.__doc__ or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m synth.pages_real", description=summary)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("train", "heldout"), default="train")
    parser.add_argument(
        "--long-side",
        type=int,
        nargs=2,
        default=LONG_SIDE,
        metavar=("MIN", "MAX"),
        help="pixels of a set page's longer side, drawn between MIN and MAX",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    counts = write_real_pages(
        args.out,
        args.n,
        args.seed,
        split=args.split,
        long_side=(args.long_side[0], args.long_side[1]),
    )
    seconds = time.perf_counter() - started
    print(f"{args.n} {args.split} pages {counts} in {args.out} ({seconds:.0f}s)")


if __name__ == "__main__":
    main()
