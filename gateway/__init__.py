"""`pagestream api`: the HTTP front door of the pipeline (one process per replica).

    app.py       the FastAPI application: its parts, operations routes, metrics, errors
    context.py   what handlers share: the Gateway, the caller's key, ApiError
    documents.py submit, status, Markdown, events, process
    admin.py     the caller, their documents; lag and dead letters (admin keys)
    uploads.py   multipart bodies streamed to the blob store (413, 415, 400)
    publish.py   records produced from handlers, each awaited until acknowledged
    view.py      the replica's SQLite view of docs.progress and docs.results
    keys.py      API keys, stored hashed, one tenant and role each
    models.py    request and answer bodies beside the schemas/ records (the spec)
    metrics.py   Prometheus metrics
    spec.py      the OpenAPI document (docs/openapi.json)
    cli.py       `pagestream api` and `pagestream api-keys` (an entry point)

It imports schemas and streams, never gpu_node; nothing imports it.
"""
