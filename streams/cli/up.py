"""`pagestream up`: the whole pipeline on this machine, with sample documents."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from streams.blobs import BlobStore
from streams.cli.common import fail, out, settings
from streams.cli.display import print_lag, print_result
from streams.client.results import resolved
from streams.local import broker as broker_mod
from streams.security.credentials import CredentialsError
from streams.settings import Settings

if TYPE_CHECKING:
    from streams.local.up import Child


def register(app: typer.Typer) -> None:
    app.command()(up)


def up(
    exit_when_done: Annotated[
        bool, typer.Option(help="Stop everything once the samples are done (no Ctrl-C wait).")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the sample results.")] = 900,
    secure: Annotated[
        bool | None,
        typer.Option(
            "--secure/--plaintext",
            help="A SASL_SSL broker with ACLs; the GPU node, the agents, the submitter and "
            "the results reader each as their own principal. Default: "
            "PAGESTREAM_BROKER__SECURE (false).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print each sample's full DocumentResult, one per line.")
    ] = False,
) -> None:
    """Run the whole pipeline locally: broker, topics, GPU node, agents, sample documents.

    Submits one sample document per operation (classify, extract, process, ocr on a
    two-page PDF), prints a short block per result (--json: the whole DocumentResult)
    and the consumer lag, then keeps the pipeline running until Ctrl-C (or stops at
    once with --exit-when-done).
    """
    from streams.local import up as lp

    s = settings()
    if secure is not None:
        s = s.model_copy(update={"broker": s.broker.model_copy(update={"secure": secure})})
    else:
        s = s.model_copy(update={"broker": broker_mod.in_recorded_mode(s.broker)})
    log_dir = s.broker.data_dir.parent / "up-logs"
    blobs = BlobStore.from_settings(s.blobs)
    stopping = _StopRequest()
    signal.signal(signal.SIGINT, stopping.set)
    signal.signal(signal.SIGTERM, stopping.set)
    try:
        with lp.running_pipeline(s, log_dir) as children:
            names = ", ".join(f"{c.name} (pid {c.proc.pid})" for c in children)
            out.print(f"started {names}")
            out.print(f"their logs are in {log_dir}", soft_wrap=True)
            # The reader is closed before the lag is read and the pipeline stops.
            with lp.results_from_now(s) as poll:
                run_id = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
                submitted = lp.submit_samples(s, run_id)
                out.print(f"{len(submitted)} sample documents submitted; waiting for their "
                          "results")  # fmt: skip
                lp.wait_for_results(
                    poll, set(submitted), children, timeout_s=timeout, stop=stopping.requested,
                    on_result=lambda r: print_result(out, resolved(r, blobs), as_json=as_json),
                )  # fmt: skip
            if stopping.requested():
                out.print("interrupted: stopping")
            else:
                print_lag(out, lp.settled_lag(s))
                _print_gateway(s)
                if not exit_when_done:
                    _serve(children, stopping)
                out.print("stopping")
    except (lp.PipelineError, broker_mod.BrokerError, CredentialsError) as exc:
        fail(str(exc))
    out.print("stopped cleanly")


def _print_gateway(s: Settings) -> None:
    from streams.local import up as lp

    url = lp.api_ready(s)
    if url is None:
        out.print(f"the HTTP gateway is not ready: see {lp.api_folder(s).parent / 'up-logs'}")
        return
    key = lp.local_api_key(s)
    out.print(
        f"HTTP gateway: {url} (web console {url}/console/, API docs {url}/docs)", soft_wrap=True
    )
    out.print(f"API key of the local tenant 'local': {key}", soft_wrap=True)
    # The pipeline's one keys file: `api-keys create` run with these settings writes here.
    out.print(
        f"its keys file: {s.api.keys_file} (more keys: pagestream api-keys create --tenant NAME)",
        soft_wrap=True,
        markup=False,
        highlight=False,
    )
    out.print(
        f'  curl -H "Authorization: Bearer {key}" -F file=@doc.pdf -F operation=ocr '
        f"{url}/v1/documents",
        soft_wrap=True,
    )


class _StopRequest:
    """Set by SIGINT or SIGTERM. A plain flag: a signal handler runs between two
    bytecodes of the main thread and must not take a lock that thread may hold."""

    def __init__(self) -> None:
        self._requested = False

    def set(self, *_: object) -> None:
        self._requested = True

    def requested(self) -> bool:
        return self._requested


def _serve(children: list[Child], stopping: _StopRequest) -> None:
    """Keep the pipeline running until Ctrl-C; a child that exits ends it."""
    from streams.local.up import PipelineError

    out.print("the pipeline keeps running (`pagestream submit` for more); Ctrl-C stops it")
    while not stopping.requested():
        for child in children:
            if child.proc.poll() is not None:
                raise PipelineError(f"{child.name} exited: see {child.log_path}")
        time.sleep(0.5)
