"""What FastAPI resolves for a handler before it runs: the replica's parts (`State`), the
caller's key (`Caller`, 401 without a valid one), an admin key (`Admin`, 403 otherwise);
and the limits a submission passes before its body is read (`admit`).

The submissions read their bodies themselves, in the handler, so no byte of an upload
is read before `Caller` has answered. (FastAPI reads a body declared as a model, as the
dead-letter replay's is, before it resolves dependencies: issue 34.) `admit` is called by
the handler rather than declared as a dependency so that it runs after the idempotent
replay check, as it always has: a replayed submission spends no token.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.errors import RETRY_AFTER_S, ApiError
from gateway.keys import ApiKey
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


def admit(gw: Gateway, caller: ApiKey) -> None:
    """429 when `caller` is over its submission rate, or its tenant has too many
    documents in flight; else a token is spent."""
    if (wait_s := gw.rate.take(caller.key_id)) is not None:
        raise ApiError(
            429,
            f"over {gw.settings.api.rate_per_s:g} submissions a second for this key",
            {"Retry-After": str(max(1, round(wait_s)))},
        )
    if gw.view.in_flight(caller.tenant) >= gw.settings.api.max_in_flight:
        raise ApiError(
            429,
            f"{gw.settings.api.max_in_flight} documents of this tenant are "
            "in flight; wait for some to end",
            {"Retry-After": RETRY_AFTER_S},
        )
