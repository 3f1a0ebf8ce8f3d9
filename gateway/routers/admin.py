"""Who the caller is, and the operator's routes (admin keys only): consumer lag per group
and topic, the dead letters still to look at, and their replay.

An admin key lists and replays only its own tenant's dead letters (what each letter's
record says: streams/admin/dlq/letters.py); an operator key (`api-keys create
--operator`) every tenant's, and the letters no tenant can be told for. Another tenant's
letter answers as a letter that is not pending."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from gateway.bodies import (
    DeadLetterView,
    GroupLagView,
    Me,
    Problem,
    ReplayAnswer,
    ReplayRequest,
    TopicLag,
)
from gateway.dependencies import Admin, Caller, State
from gateway.errors import ApiError
from gateway.front_door import read_json
from gateway.keys import ApiKey
from schemas import headers
from streams.admin.dlq import DeadLetter, Filter, ReplayTakenOver, pending_dead, replay
from streams.admin.lag import all_lag

_MAX_MESSAGE_CHARS = 300

router = APIRouter()


@router.get("/v1/me", response_model=Me)
def me(caller: Caller) -> Me:
    """The caller's key id, tenant and role."""
    return Me(key_id=caller.key_id, tenant=caller.tenant, role=caller.role)


@router.get("/v1/admin/lag", response_model=list[GroupLagView])
async def lag(gw: State, _admin: Admin) -> list[GroupLagView]:
    """Consumer lag of this pipeline's groups, in records, per topic."""
    prefix = gw.settings.topics.prefix
    groups = await run_in_threadpool(all_lag, gw.admin)
    views = []
    for group in groups:
        if prefix and not group.group.startswith(prefix):
            continue  # another pipeline's on a shared cluster
        topics: dict[str, list[int]] = {}
        for p in group.partitions:
            topics.setdefault(p.topic, []).append(p.records or p.lag or 0)
        views.append(
            GroupLagView(
                group=group.group,
                state=group.state,
                members=group.members,
                lag_records=sum(sum(v) for v in topics.values()),
                topics=[
                    TopicLag(topic=t, partitions=len(v), lag_records=sum(v))
                    for t, v in sorted(topics.items())
                ],
            )
        )
    return views


@router.get("/v1/admin/dead-letters", response_model=list[DeadLetterView])
async def dead_letters(
    gw: State,
    caller: Admin,
    stage: str | None = None,
    doc_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[DeadLetterView]:
    """The dead letters not yet replayed (nor refused for good), oldest first."""
    flt = Filter(stage=stage, doc_id=doc_id, tenant=_tenant_scope(caller))
    found = await run_in_threadpool(pending_dead, gw.settings, flt, None, limit)
    return [_view(d) for d in found]


# The body is read by the handler, after the key (app.py adds ReplayRequest to the spec).
_REPLAY_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReplayRequest"}}},
    }
}


@router.post(
    "/v1/admin/dead-letters/replay",
    response_model=ReplayAnswer,
    openapi_extra=_REPLAY_BODY,
    responses={409: {"model": Problem}, 413: {"model": Problem}, 422: {"model": Problem}},
)
async def replay_letters(request: Request, gw: State, caller: Admin) -> ReplayAnswer:
    """Send the selected dead letters back to the topics they failed on."""
    api = gw.settings.api
    body = await read_json(request, ReplayRequest, api.max_json_bytes, api.idle_timeout_s)
    letters = frozenset(_position(i) for i in body.ids)
    flt = Filter(letters=letters, tenant=_tenant_scope(caller))
    try:
        report = await run_in_threadpool(replay, gw.settings, flt)
    except ReplayTakenOver as exc:  # another replica's replay of the group fenced this one
        raise ApiError(409, str(exc)) from exc
    return ReplayAnswer(
        replayed=report.replayed,
        refused=report.refused,
        deferred=report.deferred,
        not_pending=len(letters) - report.replayed - report.refused - report.deferred,
    )


def _tenant_scope(caller: ApiKey) -> str | None:
    """The tenant whose dead letters `caller` sees: its own, or all (None) for an operator."""
    return None if caller.sees_every_tenant else caller.tenant


def _position(letter_id: str) -> tuple[int, int]:
    partition, _, offset = letter_id.partition(":")
    if not (partition.isdigit() and offset.isdigit()):
        raise ApiError(422, f"{letter_id[:40]!r} is not a dead letter id (partition:offset)")
    return int(partition), int(offset)


def _view(dead: DeadLetter) -> DeadLetterView:
    message = dead.header(headers.ERROR_EXCEPTION_MESSAGE)
    return DeadLetterView(
        id=f"{dead.partition}:{dead.offset}",
        doc_id=dead.doc_id,
        topic=dead.header(headers.ERROR_TOPIC),
        stage=dead.stage,
        exception=dead.exception_class,
        message=message[:_MAX_MESSAGE_CHARS] if message else None,
        failed_at=dead.failed_at,
        replays=dead.replays,
    )
