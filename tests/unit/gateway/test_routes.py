"""Every route of the gateway, walked: none declares a body FastAPI would read before the
key, every route that takes a body authenticates first, and /metrics is on the public
port only when no metrics address is set, and never on the public port's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from typer.testing import CliRunner

from gateway import dependencies
from gateway.app import create_app
from gateway.limits import Slots
from streams.cli import app
from streams.settings import ApiSettings, Settings

_WITH_BODY = {"POST", "PUT", "PATCH", "DELETE"}


def _routes(settings: Settings) -> list[APIRoute]:
    return [r for r in create_app(settings).routes if isinstance(r, APIRoute)]


def _calls(dependant: Dependant) -> Iterator[object]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from _calls(sub)


def test_no_route_declares_a_body_fastapi_would_read_before_the_key() -> None:
    # FastAPI reads and parses a declared body before it resolves any dependency, the
    # key's included: a 40 MB body was read whole, unauthenticated (issue 34).
    declared = [f"{r.methods} {r.path}" for r in _routes(Settings()) if r.body_field is not None]
    assert declared == [], "read the body in the handler, after the key (front_door.read_json)"


def test_every_route_that_takes_a_body_authenticates() -> None:
    routes = [r for r in _routes(Settings()) if r.methods & _WITH_BODY]
    assert {r.path for r in routes} >= {
        "/v1/documents",
        "/v1/process",
        "/v1/admin/dead-letters/replay",
    }
    for route in routes:
        assert dependencies._caller in set(_calls(route.dependant)), route.path


def test_metrics_are_on_the_public_port_for_admins_only_without_a_metrics_address() -> None:
    def metrics(settings: Settings) -> list[APIRoute]:
        return [r for r in _routes(settings) if r.path == "/metrics"]

    (public,) = metrics(Settings())
    assert dependencies._admin in set(_calls(public.dependant))
    apart = Settings(api=ApiSettings(metrics_address="127.0.0.1:9464"))
    assert metrics(apart) == []


@pytest.mark.parametrize("address", ["9464", "host:", ":9464", "host:port", "host:70000"])
def test_a_metrics_address_is_host_and_port(address: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        ApiSettings(metrics_address=address)
    assert ApiSettings(metrics_address="[::]:9464").metrics_address == "[::]:9464"


def test_a_slot_is_released_once_and_its_name_forgotten() -> None:
    slots = Slots()
    first = slots.take(("stream", "k1"), 2)
    second = slots.take(("stream", "k1"), 2)
    assert first is not None and second is not None
    assert slots.take(("stream", "k1"), 2) is None
    assert slots.take(("stream", "k2"), 2) is not None  # another key's own
    first.release()
    first.release()  # a second release gives nothing back twice
    assert slots.held(("stream", "k1")) == 1
    with second:
        pass
    assert slots.held(("stream", "k1")) == 0 and ("stream", "k1") not in slots._held


def test_the_gateway_will_not_serve_metrics_on_its_public_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAGESTREAM_API__METRICS_ADDRESS", "0.0.0.0:8080")
    # Checked before the store is: without the check, this store would stop it instead.
    monkeypatch.setenv("PAGESTREAM_BLOBS__ROOT", "nope://nowhere")
    result = CliRunner().invoke(app, ["api"])
    assert result.exit_code != 0 and "port of its own" in result.output, result.output
