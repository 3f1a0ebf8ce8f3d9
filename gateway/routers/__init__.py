"""The gateway's routes, one `APIRouter` per concern (app.py includes them all):

    documents  POST /v1/documents, POST /v1/process, GET /v1/documents, one document's
               status, Markdown and page images
    events     GET /v1/documents/{id}/events (Server-Sent Events)
    admin      GET /v1/me; lag and dead letters, and their replay (admin keys)
    console    the web console under /console/; / redirects there
    health     /healthz, /readyz; /metrics (admin keys) unless it is served apart

Handlers take their parts from gateway.dependencies (`State`, `Caller`, `Admin`) and leave
the work to the modules beside this package: submissions, status, the view.
"""
