"""What FastAPI resolves for a handler before it runs: the replica's parts (`State`), the
caller's key (`Caller`, 401 without a valid one), an admin key (`Admin`, 403 otherwise),
a view that has caught up (`READY`, 503 otherwise, for the routes that read it); the
limits a submission passes before its body is read (`admit`), and the slots a key holds
while it waits (`hold`).

Every handler reads its body itself, after its dependencies, so no byte of a body is
read before `Caller` has answered: FastAPI reads a body declared as a model before it
resolves any dependency (issue 34), and tests/unit/gateway/test_routes.py keeps every
route from declaring one. `admit` is called by the handler rather than declared as a
dependency so that it runs after the idempotent replay check: a replayed submission
spends no token.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Literal

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.errors import RETRY_AFTER_S, ApiError
from gateway.keys import ApiKey
from gateway.limits import Slot
from gateway.state import Gateway


def gateway_of(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


State = Annotated[Gateway, Depends(gateway_of)]

_bearer = HTTPBearer(auto_error=False, description="an API key: `pagestream api-keys create`")


def _caller(
    gw: State,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiKey:
    key = gw.keys.authenticate(credentials.credentials) if credentials is not None else None
    if key is None:
        raise ApiError(
            401,
            "a valid API key is required: Authorization: Bearer KEY",
            {"WWW-Authenticate": "Bearer"},
        )
    return key


Caller = Annotated[ApiKey, Depends(_caller)]


def _admin(caller: Caller) -> ApiKey:
    if not caller.is_admin:
        raise ApiError(403, "this needs an admin key (`pagestream api-keys create --admin`)")
    return caller


Admin = Annotated[ApiKey, Depends(_admin)]


def _operator(caller: Admin) -> ApiKey:
    if not caller.sees_every_tenant:
        raise ApiError(403, "this needs an operator key (`pagestream api-keys create --operator`)")
    return caller


# Sees every tenant: what names them all (the public port's /metrics).
Operator = Annotated[ApiKey, Depends(_operator)]


def _ready(gw: State, caller: Caller) -> ApiKey:
    # After the key: a caller without one learns nothing of the replica.
    if not gw.view.ready:
        raise ApiError(
            503,
            "this replica's view of the pipeline is catching up; try again",
            {"Retry-After": RETRY_AFTER_S},
        )
    return caller


# For the routers whose handlers read the view: a status read before it has caught up
# would answer 404 for a document it has not seen yet, and a submission would miss its
# idempotent replay.
READY = Depends(_ready)

Kind = Literal["stream", "wait", "upload"]
_WHAT: dict[Kind, str] = {
    "stream": "events streams",
    "wait": "long polls (?wait, /v1/process)",
    "upload": "submissions being received",
}


def hold(gw: Gateway, kind: Kind, caller: ApiKey) -> Slot:
    """One of the key's slots of `kind` on this replica, until released; 429 when it
    holds them all."""
    api = gw.settings.api
    limit, setting = {
        "stream": (api.max_streams_per_key, "MAX_STREAMS_PER_KEY"),
        "wait": (api.max_waits_per_key, "MAX_WAITS_PER_KEY"),
        "upload": (api.max_uploads_per_key, "MAX_UPLOADS_PER_KEY"),
    }[kind]
    slot = gw.slots.take((kind, caller.key_id), limit)
    if slot is None:
        raise ApiError(
            429,
            f"this key has {limit} {_WHAT[kind]} open on this replica "
            f"(PAGESTREAM_API__{setting}); end one first",
            {"Retry-After": RETRY_AFTER_S},
        )
    return slot


def admit(gw: Gateway, caller: ApiKey) -> contextlib.ExitStack:
    """429 when `caller` has too many submissions being received, or is over its
    submission rate, or its tenant has too many documents in flight; else a token is
    spent, and the submission holds, until the stack returned is closed, one of the
    key's upload slots and a place among the tenant's documents in flight: from before
    its body is read until the view counts it."""
    held = contextlib.ExitStack()
    try:
        held.enter_context(hold(gw, "upload", caller))
        if (wait_s := gw.rate.take(caller.key_id)) is not None:
            raise ApiError(
                429,
                f"over {gw.settings.api.rate_per_s:g} submissions a second for this key",
                {"Retry-After": str(max(1, round(wait_s)))},
            )
        receiving = ("receiving", caller.tenant)
        in_flight = gw.view.in_flight(caller.tenant) + gw.slots.held(receiving)
        if in_flight >= gw.settings.api.max_in_flight:
            raise ApiError(
                429,
                f"{gw.settings.api.max_in_flight} documents of this tenant are in "
                "flight (uploads being received included); wait for some to end",
                {"Retry-After": RETRY_AFTER_S},
            )
        held.enter_context(gw.slots.hold(receiving))
    except BaseException:
        held.close()
        raise
    return held
