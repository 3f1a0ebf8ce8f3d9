"""`pagestream api` and `pagestream api-keys`, registered on the CLI through the
`pagestream.commands` entry point (streams never imports gateway)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from gateway.keys import KeyFileError, KeyStore, Role
from streams.cli.common import fail, out, settings

keys_app = typer.Typer(
    help="API keys of the HTTP gateway (stored hashed, one tenant each).", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.command("api")(api)
    app.command("api-spec")(api_spec)
    app.add_typer(keys_app, name="api-keys")


def api(
    host: Annotated[str | None, typer.Option(help="PAGESTREAM_API__HOST")] = None,
    port: Annotated[int | None, typer.Option(help="PAGESTREAM_API__PORT")] = None,
) -> None:
    """Run one HTTP gateway replica: uploads, status, results, events, the console."""
    import uvicorn

    from gateway.app import create_app
    from streams.blobs import BlobStoreConfigError, probed_store
    from streams.settings.api import metrics_bind

    conf = settings()
    if host is not None:
        conf.api.host = host
    if port is not None:
        conf.api.port = port
    if conf.api.max_upload_bytes > conf.blobs.max_blob_bytes:
        fail(
            f"PAGESTREAM_API__MAX_UPLOAD_BYTES ({conf.api.max_upload_bytes}) is over "
            f"PAGESTREAM_BLOBS__MAX_BLOB_BYTES ({conf.blobs.max_blob_bytes}): the agents "
            "would refuse what the gateway accepts"
        )
    metrics = conf.api.metrics_address
    if metrics is not None and metrics_bind(metrics)[1] == conf.api.port != 0:
        fail(
            f"PAGESTREAM_API__METRICS_ADDRESS ({metrics}) needs a port of its own, not "
            f"the API's ({conf.api.port}): /metrics is kept off the public port"
        )
    try:
        probed_store(conf.blobs)
    except BlobStoreConfigError as exc:
        fail(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    uvicorn.run(
        create_app(conf),
        host=conf.api.host,
        port=conf.api.port,
        # Bodies are read by the handlers with their own idle timeout; this one cuts
        # connections that go quiet between requests.
        timeout_keep_alive=int(conf.api.idle_timeout_s),
        # SIGTERM: requests under way get this long (a long poll, an events stream, an
        # upload) before the view and the producer are closed.
        timeout_graceful_shutdown=int(conf.api.idle_timeout_s),
        log_level="info",
        access_log=False,  # the request histogram counts them; paths hold doc ids only
    )


def api_spec(
    out: Annotated[Path | None, typer.Option(help="write it here (docs/openapi.json)")] = None,
) -> None:
    """Print the HTTP API's OpenAPI spec (generated from the schemas/ records)."""
    from gateway.spec import spec_text

    text = spec_text()
    if out is None:
        print(text, end="")
    else:
        out.write_text(text)


@keys_app.command("create")
def create(
    tenant: Annotated[str, typer.Option(help="the tenant the key acts for")],
    admin: Annotated[
        bool, typer.Option(help="may read the lag, list and replay its tenant's dead letters")
    ] = False,
    operator: Annotated[
        bool, typer.Option(help="an admin key of every tenant's dead letters, not only its own")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="the key and its record")] = False,
) -> None:
    """Create a key and print it (alone on stdout): it is shown this once."""
    role: Role = "operator" if operator else "admin" if admin else "user"
    try:
        key, record = KeyStore(settings().api.keys_file).create(tenant, role)
    except (ValueError, KeyFileError) as exc:
        fail(str(exc))
    if as_json:
        print(
            json.dumps({"key": key, **{k: v for k, v in asdict(record).items() if k != "sha256"}})
        )
    else:
        print(key)


@keys_app.command("list")
def list_keys(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The keys (ids, tenants, roles, revocations; never the keys themselves)."""
    try:
        keys = KeyStore(settings().api.keys_file).keys()
    except KeyFileError as exc:
        fail(str(exc))
    rows = [{k: v for k, v in asdict(key).items() if k != "sha256"} for key in keys]
    if as_json:
        print(json.dumps(rows))
        return
    for row in rows:
        state = f"revoked {row['revoked_at']}" if row["revoked_at"] else "live"
        out.print(
            f"{row['key_id']}  {row['tenant']}  {row['role']}  {state}",
            markup=False,
            highlight=False,
        )


@keys_app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="the key's id (`api-keys list`)")]) -> None:
    """Revoke a key: the gateways refuse it as soon as they see the file change."""
    try:
        KeyStore(settings().api.keys_file).revoke(key_id)
    except (KeyError, KeyFileError) as exc:
        fail(str(exc))
    out.print(f"revoked {key_id}", markup=False, highlight=False)
