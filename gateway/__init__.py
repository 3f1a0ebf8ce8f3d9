"""`pagestream api`: the HTTP front door of the pipeline (one process per replica), laid
out as FastAPI's "bigger applications".

    app.py           the FastAPI application: its routers, request metrics, problems, spec
    routers/         one APIRouter per concern: documents, events, admin, console, health
    dependencies.py  what handlers are given: the replica's parts, the caller's key (401),
                     an admin key (403); the submission limits (429)
    state.py         the replica's parts (`Gateway`), built and closed in one place
    submissions.py   a submission from request to docs.raw: Idempotency-Key, limits, the
                     body read, the intake shared with `pagestream submit`
    status.py        one document as its caller may see it: owned, resolved, its status
    errors.py        ApiError and the one JSON body of every refusal
    bodies.py        request and answer bodies beside the schemas/ records (the spec)
    uploads.py       multipart bodies streamed to the blob store (413, 415, 400)
    publish.py       records produced from handlers, each awaited until acknowledged
    view.py          the replica's SQLite view of docs.progress and docs.results
    waiting.py       requests waiting on documents, woken by the view's callback
    limits.py        submissions per second per key (token buckets)
    keys.py          API keys, stored hashed, one tenant and role each
    metrics.py       Prometheus metrics
    spec.py          the OpenAPI document (docs/openapi.json)
    cli.py           `pagestream api` and `pagestream api-keys` (an entry point)

It imports schemas and streams, never gpu_node; nothing imports it. A document reaches
docs.raw the one way `pagestream submit`'s do: streams/client/intake.py.
"""
