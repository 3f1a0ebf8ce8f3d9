"""bench.agents' `--set`: worker settings named with or without their prefix; names that
are no setting, or that the bench sets itself, refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.agents.run import BENCH_OWNS, own_settings, worker_settings


def test_settings_are_named_as_the_workers_read_them() -> None:
    pairs = ["agents__producer_linger_ms=0", "PAGESTREAM_AGENTS__MAX_IN_FLIGHT=4000"]
    pairs.append("KAFKA__CLIENT_ID=a=b")
    assert worker_settings(pairs) == {
        "PAGESTREAM_AGENTS__PRODUCER_LINGER_MS": "0",
        "PAGESTREAM_AGENTS__MAX_IN_FLIGHT": "4000",
        "PAGESTREAM_KAFKA__CLIENT_ID": "a=b",  # the value keeps what follows the first '='
    }


@pytest.mark.parametrize("pair", ["AGENTS__PRODUCER_LINGER_MS", "=0", " =1"])
def test_a_pair_without_a_name_or_a_value_is_refused(pair: str) -> None:
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        worker_settings([pair])


@pytest.mark.parametrize(
    "pair", ["AGENTS__PRODUCER_LINGER=0", "AGENTS=1", "AGENTS__MAX_IN_FLIGHT__X=1", "PAGESTREAM_=1"]
)
def test_a_name_that_is_no_setting_is_refused(pair: str) -> None:
    with pytest.raises(ValueError, match="is not a setting"):
        worker_settings([pair])


def test_what_the_bench_sets_itself_is_refused() -> None:
    for name in BENCH_OWNS:
        with pytest.raises(ValueError, match="the bench sets"):
            worker_settings([f"{name}=x"])
    owned = own_settings("127.0.0.1:9", "p.", 1, Path("blobs"), progress=False)
    assert set(owned) < BENCH_OWNS and owned["PAGESTREAM_AGENTS__PROGRESS_EVENTS"] == "false"
