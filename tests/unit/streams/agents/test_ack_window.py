"""The in-flight window of route and deliver: inputs acknowledged in the order taken, only
after their outputs; bounded; a document's end in flight is visible."""

from __future__ import annotations

import asyncio

import pytest

from streams.agents.ack_window import InFlight, Window


class _Record:
    """A record whose outputs the test acknowledges when it likes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.outputs_acked = asyncio.Event()

    async def settle(self) -> None:
        await self.outputs_acked.wait()


async def _settled() -> None:
    for _ in range(5):  # let the releaser run
        await asyncio.sleep(0)


def test_inputs_are_acknowledged_in_the_order_taken_once_their_outputs_are() -> None:
    async def run() -> list[str]:
        acked: list[str] = []

        async def ack(event: str) -> None:
            acked.append(event)

        window = Window("t", ack, limit=10)
        records = [_Record(n) for n in "abc"]
        for r in records:
            await window.put(InFlight(r.name, r.settle))
        records[1].outputs_acked.set()
        records[2].outputs_acked.set()
        await _settled()
        assert acked == []  # b and c wait for a: faust would commit past a
        records[0].outputs_acked.set()
        await window.drain()
        window.close()
        return acked

    assert asyncio.run(run()) == ["a", "b", "c"]


def test_at_most_limit_records_are_in_flight() -> None:
    async def run() -> None:
        async def ack(event: str) -> None:
            pass

        window = Window("t", ack, limit=2)
        records = [_Record(str(i)) for i in range(3)]
        await window.put(InFlight("0", records[0].settle))
        await window.put(InFlight("1", records[1].settle))
        third = asyncio.ensure_future(window.put(InFlight("2", records[2].settle)))
        await _settled()
        assert not third.done() and len(window) == 2
        records[0].outputs_acked.set()
        await asyncio.wait_for(third, 1)
        assert len(window) == 2
        window.close()

    asyncio.run(run())


def test_a_document_whose_end_is_in_flight_is_held_until_settled() -> None:
    async def run() -> None:
        async def ack(event: str) -> None:
            pass

        window = Window("t", ack, limit=10)
        ending = _Record("end")
        await window.put(InFlight("end", ending.settle, frozenset({b"doc-1"})))
        assert window.holds(b"doc-1") and not window.holds(b"doc-2")
        assert not window.holds(None)
        ending.outputs_acked.set()
        await window.drain()
        assert not window.holds(b"doc-1")
        window.close()

    asyncio.run(run())


def test_a_releaser_that_fails_stops_the_agent_instead_of_leaving_records_unacked() -> None:
    async def run() -> None:
        async def ack(event: str) -> None:
            raise RuntimeError("broken ack")

        window = Window("t", ack, limit=1)
        done = _Record("x")
        done.outputs_acked.set()
        await window.put(InFlight("x", done.settle))
        with pytest.raises(RuntimeError, match="broken ack"):
            await window.put(InFlight("y", _Record("y").settle))
        window.close()

    asyncio.run(run())
