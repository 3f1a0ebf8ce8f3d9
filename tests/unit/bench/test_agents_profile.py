"""The profile's parts: a sample goes to the innermost frame that names a part, the
event loop only when none does, and the shares add up."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.agents.profile import OTHER, _part, shares

LOOP = "run (uvloop/loop.py:1);_run (asyncio/events.py:84)"
ROUTE = f"{LOOP};route_step (streams/agents/app.py:198);next_step (streams/routing.py:40)"


@pytest.mark.parametrize(
    ("stack", "part"),
    [
        (ROUTE, "step"),
        (f"{ROUTE};model_validate_json (pydantic/main.py:700)", "decode + validate"),
        (f"{ROUTE};encode (schemas/codec.py:20)", "encode"),
        (f"{LOOP};send (aiokafka/producer/producer.py:400)", "produce"),
        (
            f"{LOOP};send (aiokafka/producer/producer.py:400);write (asyncio/streams.py:343)",
            "kafka sockets",
        ),
        (f"{LOOP};getmany (aiokafka/consumer/consumer.py:1100)", "poll"),
        (f"{ROUTE};set (faust/tables/table.py:90)", "table (changelog)"),
        (LOOP, "event loop"),
        ("_start_thread (mode/threads.py:211)", "faust service threads"),
        ("<module> (somewhere.py:1)", OTHER),
    ],
)
def test_a_sample_goes_to_the_innermost_part_named(stack: str, part: str) -> None:
    assert _part(stack) == part


def test_shares_add_up_largest_first(tmp_path: Path) -> None:
    folded = tmp_path / "route.folded"
    folded.write_text(f"{ROUTE} 6\n{LOOP} 3\n<module> (x.py:1) 1\nnot a sample line\n")
    got = shares(folded)
    assert list(got) == ["step", "event loop", OTHER]
    assert got["step"] == pytest.approx(0.6) and sum(got.values()) == pytest.approx(1.0)
