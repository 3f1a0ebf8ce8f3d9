"""How many examples a fuzzer draws: its full count under `make test`, a tenth of it (at
least 10) under `make check`, which sets PAGESTREAM_TEST_QUICK_FUZZ=1. The fast tier still
walks every fuzzer's properties, and still fails on a broken invariant most of the time;
the full draw of every fuzzer runs in `make test`, which is what CI runs."""

from __future__ import annotations

import os

QUICK_ENV = "PAGESTREAM_TEST_QUICK_FUZZ"


def examples(full: int) -> int:
    if os.environ.get(QUICK_ENV, "") in ("", "0"):
        return full
    return max(10, full // 10)
