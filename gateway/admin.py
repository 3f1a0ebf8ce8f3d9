"""Who the caller is, their documents, and the operator's routes (admin keys only):
consumer lag per group and topic, the dead letters still to look at, and their replay."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import FastAPI, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from gateway.context import Admin, ApiError, Caller, gateway_of
from schemas import headers
from streams.operations.dlq import DeadLetter, Filter, pending_dead, replay
from streams.operations.lag import all_lag

_MAX_MESSAGE_CHARS = 300


class Me(BaseModel):
    key_id: str
    tenant: str
    role: str


class DocumentSummary(BaseModel):
    doc_id: str
    state: str  # submitted, running, ended
    status: str | None  # completed, partial, failed once ended
    pages_total: int
    pages_done: int | None
    updated_at: float  # epoch seconds


class TopicLag(BaseModel):
    topic: str
    partitions: int
    lag_records: int  # lag in records (markers excluded), as `pagestream lag` counts it


class GroupLagView(BaseModel):
    group: str
    state: str
    members: int
    lag_records: int
    topics: list[TopicLag]


class DeadLetterView(BaseModel):
    id: str  # "partition:offset" on docs.dlq: what a replay selects
    doc_id: str | None
    topic: str | None  # where it failed, and where a replay sends it back
    stage: str | None
    exception: str | None
    message: str | None  # the error's one line, which never holds document content
    failed_at: datetime | None
    replays: int


class ReplayRequest(BaseModel):
    model_config = {"extra": "forbid"}

    ids: list[str] = Field(min_length=1, max_length=1000)


class ReplayAnswer(BaseModel):
    replayed: int
    refused: int  # replayed too often already, or its value was not kept
    deferred: int  # still pending: the replay group's record is full; replay them again
    not_pending: int  # handled earlier, or not a dead letter


def admin_routes(app: FastAPI) -> None:
    @app.get("/v1/me", response_model=Me)
    def me(caller: Caller) -> Me:
        """The caller's key id, tenant and role."""
        return Me(key_id=caller.key_id, tenant=caller.tenant, role=caller.role)

    @app.get("/v1/documents", response_model=list[DocumentSummary])
    def documents(
        request: Request,
        caller: Caller,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> list[DocumentSummary]:
        """The caller's tenant's latest documents, newest first."""
        rows = gateway_of(request).view.recent(caller.tenant, limit)
        return [
            DocumentSummary(
                doc_id=r.doc_id,
                state=r.state,
                status=r.status,
                pages_total=r.pages_total,
                pages_done=r.pages_done,
                updated_at=r.updated_at,
            )
            for r in rows
        ]

    @app.get("/v1/admin/lag", response_model=list[GroupLagView])
    async def lag(request: Request, _admin: Admin) -> list[GroupLagView]:
        """Consumer lag of this pipeline's groups, in records, per topic."""
        settings = gateway_of(request).settings
        prefix = settings.topics.prefix
        groups = await run_in_threadpool(all_lag, gateway_of(request).admin)
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

    @app.get("/v1/admin/dead-letters", response_model=list[DeadLetterView])
    async def dead_letters(
        request: Request,
        _admin: Admin,
        stage: str | None = None,
        doc_id: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    ) -> list[DeadLetterView]:
        """The dead letters not yet replayed (nor refused for good), oldest first."""
        settings = gateway_of(request).settings
        flt = Filter(stage=stage, doc_id=doc_id)
        found = await run_in_threadpool(pending_dead, settings, flt, None, limit)
        return [_view(d) for d in found]

    @app.post("/v1/admin/dead-letters/replay", response_model=ReplayAnswer)
    async def replay_letters(request: Request, body: ReplayRequest, _admin: Admin) -> ReplayAnswer:
        """Send the selected dead letters back to the topics they failed on."""
        letters = frozenset(_position(i) for i in body.ids)
        settings = gateway_of(request).settings
        report = await run_in_threadpool(replay, settings, Filter(letters=letters))
        return ReplayAnswer(
            replayed=report.replayed,
            refused=report.refused,
            deferred=report.deferred,
            not_pending=len(letters) - report.replayed - report.refused - report.deferred,
        )


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
