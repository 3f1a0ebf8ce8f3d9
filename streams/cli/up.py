"""`pagestream up`: the whole pipeline on this machine, with sample documents."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from streams.cli.common import fail, out, settings
from streams.cli.lag import print_lag
from streams.local import broker as broker_mod
from streams.security.credentials import CredentialsError


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
) -> None:
    """Run the whole pipeline locally: broker, topics, GPU node, agents, sample documents.

    Submits one sample document per operation (classify, extract, process, ocr on a
    two-page PDF), prints each DocumentResult and the consumer lag, then keeps the
    pipeline running until Ctrl-C (or stops at once with --exit-when-done).
    """
    from streams.local import up as lp

    s = settings()
    if secure is not None:
        s = s.model_copy(update={"broker": s.broker.model_copy(update={"secure": secure})})
    else:
        s = s.model_copy(update={"broker": broker_mod.in_recorded_mode(s.broker)})
    log_dir = s.broker.data_dir.parent / "up-logs"
    stop = False

    def _on_signal(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        with lp.running_pipeline(s, log_dir) as children:
            names = ", ".join(f"{c.name} (pid {c.proc.pid})" for c in children)
            out.print(f"started {names}; their logs are in {log_dir}")
            poll = lp.results_from_now(s)
            run_id = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
            submitted = lp.submit_samples(s, run_id)
            out.print(f"{len(submitted)} sample documents submitted; waiting for their results")

            def show(result: Any) -> None:
                sample = submitted[result.doc_id]
                out.rule(f"{result.doc_id}: {sample.operation.value} -> {result.status}")
                out.print_json(result.model_dump_json(exclude_none=True))

            lp.wait_for_results(poll, set(submitted), children, timeout_s=timeout,
                                stop=lambda: stop, on_result=show)  # fmt: skip
            if stop:
                out.print("interrupted: stopping")
                return
            print_lag(lp.settled_lag(s))
            out.print("(a lag of 1 on a partition the GPU node writes is its last transaction's "
                      "commit marker, which the agents' commits do not step over)")  # fmt: skip
            if exit_when_done:
                return
            out.print("the pipeline keeps running (submit more with `pagestream submit`); "
                      "Ctrl-C stops it")  # fmt: skip
            while not stop:
                for child in children:
                    if child.proc.poll() is not None:
                        raise lp.PipelineError(f"{child.name} exited: see {child.log_path}")
                time.sleep(0.5)
            out.print("stopping")
    except (lp.PipelineError, broker_mod.BrokerError, CredentialsError) as exc:
        fail(str(exc))
    out.print("stopped cleanly")
