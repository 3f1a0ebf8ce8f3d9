"""Every request body is metered as it arrives, at the ASGI level, whatever reads it.

`BodyGuard` counts the bytes of each request's body (multipart preamble, fields and
epilogue included) against the request's limit: PAGESTREAM_API__MAX_JSON_BYTES unless
the handler, once it has authenticated the caller and knows what the body is, raises it
(`allow_body`: an upload's limit). Past the limit the read raises a 413, as soon as the
count passes it or the declared Content-Length shows it will; past
PAGESTREAM_API__BODY_DEADLINE_S since the request began, a 408. So a route that read its
body before the key (FastAPI does, for a body declared as a model: a unit test keeps
every route from declaring one) would still read at most the small limit.

An answer sent before the body was read whole closes the connection: the rest of the
body is never read, not even to be thrown away.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import ApiError, explain
from gateway.uploads import next_chunk

_SCOPE_KEY = "pagestream.body"
_JSON_LIMIT = "PAGESTREAM_API__MAX_JSON_BYTES"

M = TypeVar("M", bound=BaseModel)


@dataclass
class _Meter:
    limit: int
    setting: str  # the setting that sets the limit, named in the 413
    deadline: float  # monotonic
    deadline_s: float
    declared: int | None  # Content-Length, when given
    received: int = 0
    complete: bool = False

    def over(self) -> ApiError:
        return ApiError(
            413, f"the request body is over the limit of {self.limit} bytes ({self.setting})"
        )


class BodyGuard:
    """The ASGI middleware: a meter per HTTP request, in its scope."""

    def __init__(self, app: ASGIApp, *, max_json_bytes: int, body_deadline_s: float) -> None:
        self.app = app
        self.max_json_bytes = max_json_bytes
        self.body_deadline_s = body_deadline_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"")
        declared = int(length) if length.isdigit() else None
        has_body = bool(declared) or b"transfer-encoding" in headers
        meter = _Meter(
            limit=self.max_json_bytes,
            setting=_JSON_LIMIT,
            deadline=time.monotonic() + self.body_deadline_s,
            deadline_s=self.body_deadline_s,
            declared=declared,
            complete=not has_body,
        )
        scope[_SCOPE_KEY] = meter

        async def metered() -> Message:
            if meter.complete:  # the body is read: what follows is the disconnect
                return await receive()
            if meter.declared is not None and meter.declared > meter.limit:
                raise meter.over()  # nothing of it is read
            left = meter.deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                message = await asyncio.wait_for(receive(), left)
            except TimeoutError:
                raise ApiError(
                    408,
                    f"the request body was not received whole within {meter.deadline_s:g} s "
                    "(PAGESTREAM_API__BODY_DEADLINE_S)",
                ) from None
            if message["type"] != "http.request":
                meter.complete = True  # the client is gone
                return message
            meter.received += len(message.get("body", b""))
            if meter.received > meter.limit:
                raise meter.over()
            meter.complete = not message.get("more_body", False)
            return message

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start" and not meter.complete:
                message = {**message, "headers": [*message["headers"], (b"connection", b"close")]}
            await send(message)

        await self.app(scope, metered, closing)


def allow_body(request: Request, limit: int, setting: str) -> None:
    """This request's body may be up to `limit` bytes (`setting` names the limit). Called
    by a handler once the caller is authenticated and the kind of body is known."""
    meter: _Meter = request.scope[_SCOPE_KEY]
    meter.limit, meter.setting = limit, setting


async def read_json(request: Request, model: type[M], limit: int, idle_timeout_s: float) -> M:
    """A small JSON body, read whole (at most `limit` bytes: 413 past it) into `model`
    (422 when it is not one)."""
    allow_body(request, limit, _JSON_LIMIT)
    body = bytearray()
    chunks = request.stream()
    while chunk := await next_chunk(chunks, idle_timeout_s):
        body.extend(chunk)
    try:
        return model.model_validate_json(bytes(body))
    except ValidationError as exc:
        raise ApiError(422, explain(exc)) from None
