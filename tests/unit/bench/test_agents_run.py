"""bench.agents' `--set`: worker settings named with or without their prefix."""

from __future__ import annotations

import pytest

from bench.agents.run import worker_settings


def test_settings_are_named_as_the_workers_read_them() -> None:
    pairs = ["agents__producer_linger_ms=0", "PAGESTREAM_AGENTS__MAX_IN_FLIGHT=4000"]
    pairs.append("AGENTS__X=a=b")
    assert worker_settings(pairs) == {
        "PAGESTREAM_AGENTS__PRODUCER_LINGER_MS": "0",
        "PAGESTREAM_AGENTS__MAX_IN_FLIGHT": "4000",
        "PAGESTREAM_AGENTS__X": "a=b",  # the value keeps what follows the first '='
    }


@pytest.mark.parametrize("pair", ["AGENTS__PRODUCER_LINGER_MS", "=0", " =1"])
def test_a_pair_without_a_name_or_a_value_is_refused(pair: str) -> None:
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        worker_settings([pair])
