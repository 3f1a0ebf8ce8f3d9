"""`pagestream` command line: broker, topics, submit, lag and the local demo."""

from __future__ import annotations

import json
import logging
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from confluent_kafka import KafkaException
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from schemas import (
    Backend,
    DocumentType,
    Operation,
    Options,
    RecordError,
    export_json_schemas,
)
from schemas import headers as schema_headers
from streams import broker as broker_mod
from streams import kafka, topics_apply
from streams import lag as lag_mod
from streams import submit as submit_mod
from streams.settings import Settings
from streams.topics import RAW, Topology

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
broker_app = typer.Typer(no_args_is_help=True, help="The embedded single-node KRaft broker.")
topics_app = typer.Typer(no_args_is_help=True, help="Topics declared in streams/topics.py.")
app.add_typer(broker_app, name="broker")
schemas_app = typer.Typer(no_args_is_help=True, help="Message contracts.")
dlq_app = typer.Typer(no_args_is_help=True, help="Dead letters in docs.dlq: list, show, replay.")
app.add_typer(topics_app, name="topics")
app.add_typer(schemas_app, name="schemas")
app.add_typer(dlq_app, name="dlq")

out = Console()
# soft_wrap: error lines stay whole for grep and log collectors.
err = Console(stderr=True, soft_wrap=True)


def _settings() -> Settings:
    return Settings()


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


@broker_app.command("start")
def broker_start() -> None:
    """Start the broker; returns once it answers metadata requests."""
    s = _settings().broker
    t0 = time.monotonic()
    try:
        info = broker_mod.start(s)
    except broker_mod.BrokerError as exc:
        err.print(f"broker failed to start: {exc}", style="red", markup=False, highlight=False)
        raise typer.Exit(1) from exc
    out.print(
        f"Apache Kafka {info.version} at {info.bootstrap} (pid {info.pid}, "
        f"data {info.data_dir}) ready in {time.monotonic() - t0:.1f}s"
    )


@broker_app.command("stop")
def broker_stop() -> None:
    """Stop the broker cleanly (controlled shutdown)."""
    out.print("stopped" if broker_mod.stop(_settings().broker) else "no broker was running")


@broker_app.command("status")
def broker_status() -> None:
    """Print the Kafka version and bootstrap address; exit 1 if not running."""
    info = broker_mod.status(_settings().broker)
    if info is None or not broker_mod.answers_metadata(info.bootstrap):
        out.print("not running")
        raise typer.Exit(1)
    out.print(f"running: Apache Kafka {info.version}, bootstrap {info.bootstrap}, pid {info.pid}")


@topics_app.command("apply")
def topics_apply_cmd() -> None:
    """Create missing topics, raise partition counts, align configs."""
    s = _settings()
    topology = Topology(s.topics.prefix, s.agents.app_id)
    changes = topics_apply.apply(kafka.admin(s.kafka), topology, s.topics.replication_factor)
    for change in changes:
        out.print(str(change))
    if not changes:
        out.print("nothing changed: every topic matches streams/topics.py")


@topics_app.command("list")
def topics_list() -> None:
    """The declared topics, their purpose and configs."""
    s = _settings()
    table = Table("topic", "partitions", "configs", "purpose")
    for name, spec in Topology(s.topics.prefix, s.agents.app_id).specs():
        configs = " ".join(f"{k}={v}" for k, v in spec.configs().items())
        table.add_row(name, str(spec.partitions), configs, spec.purpose)
    out.print(table)


@schemas_app.command("export")
def schemas_export(out_dir: Path) -> None:
    """Write the JSON Schema of every record and extraction model to OUT_DIR."""
    for path in export_json_schemas(out_dir):
        out.print(str(path))


@app.command()
def synth(
    out_dir: Annotated[Path, typer.Option("--out")],
    n: Annotated[int, typer.Option("--n", min=1)] = 80,
    seed: Annotated[int, typer.Option()] = 0,
    width: Annotated[int, typer.Option(min=160)] = 960,
    pdfs: Annotated[int, typer.Option(min=0)] = 3,
    upright: Annotated[bool, typer.Option(help="No 90/180/270 rotations.")] = False,
) -> None:
    """Write synthetic ID documents, invoices and letters with ground truth."""
    from synth.dataset import write_dataset

    summary = write_dataset(
        out_dir,
        n=n,
        seed=seed,
        width=width,
        n_pdfs=pdfs,
        rotations=(0,) if upright else (0, 90, 180, 270),
    )
    out.print(
        f"{summary.n_images} images, {summary.n_pdfs} PDFs ({summary.n_pdf_pages} pages) "
        f"in {out_dir}; ground truth in {summary.manifest}"
    )


@app.command("train-classifier")
def train_classifier(
    data: Annotated[Path, typer.Option(help="Folder per class: DATA/<document_type>/*.jpg")],
    out_path: Annotated[Path, typer.Option("--out")],
    arch: Annotated[str, typer.Option()] = "efficientnet_b0",
    epochs: Annotated[int, typer.Option(min=1)] = 8,
    input_size: Annotated[int, typer.Option(min=32)] = 160,
    batch_size: Annotated[int, typer.Option(min=1)] = 32,
    seed: Annotated[int, typer.Option()] = 0,
    threads: Annotated[int | None, typer.Option(help="Default: one per core.")] = None,
) -> None:
    """Train the document-type classifier (needs the `models` extra)."""
    from gpu_node.training import train

    logging.getLogger("gpu_node").setLevel(logging.INFO)
    report = train(
        data,
        out_path,
        arch=arch,
        epochs=epochs,
        input_size=input_size,
        batch_size=batch_size,
        seed=seed,
        threads=threads,
    )
    out.print(
        f"validation accuracy {report.accuracy:.4f} on {report.n_val} images "
        f"({report.n_train} trained, {report.epochs} epochs, {report.seconds:.0f}s)"
    )
    out.print(report.format_confusion(), markup=False, highlight=False)
    out.print(f"checkpoint: {out_path}")


def _dlq_filter(
    stage: str | None, exception: str | None, doc_id: str | None,
    since: datetime | None, until: datetime | None,
) -> Any:  # fmt: skip
    from streams.dlq import Filter

    def aware(t: datetime | None) -> datetime | None:
        return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t

    return Filter(stage, exception, doc_id, aware(since), aware(until))


StageOpt = Annotated[str | None, typer.Option(help="ingest, route, deliver, webhook, orient, ...")]
ExcOpt = Annotated[str | None, typer.Option(help="substring of the exception class")]
DocOpt = Annotated[str | None, typer.Option("--doc-id")]
SinceOpt = Annotated[datetime | None, typer.Option(help="failed at or after (UTC if no zone)")]
UntilOpt = Annotated[datetime | None, typer.Option(help="failed at or before")]


@dlq_app.command("list")
def dlq_list(
    stage: StageOpt = None,
    exception: ExcOpt = None,
    doc_id: DocOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
) -> None:
    """Dead letters matching the filters (headers only: values are documents)."""
    from streams import dlq

    found = dlq.list_dead(_settings(), _dlq_filter(stage, exception, doc_id, since, until))
    table = Table("partition", "offset", "doc_id", "stage", "exception", "message", "replays",
                  "failed at", title=f"{len(found)} dead letters")  # fmt: skip
    for d in found:
        table.add_row(
            str(d.partition), str(d.offset), d.doc_id or "-", d.stage or "-",
            (d.exception_class or "-").rsplit(".", 1)[-1],
            (d.header(schema_headers.ERROR_EXCEPTION_MESSAGE) or "")[:80],
            str(d.replays), d.header(schema_headers.ERROR_FAILED_AT) or "-",
        )  # fmt: skip
    out.print(table)


@dlq_app.command("show")
def dlq_show(
    partition: int,
    offset: int,
    stacktrace: Annotated[bool, typer.Option(help="include the stack trace")] = False,
) -> None:
    """Every header of one dead letter, and the size of its value."""
    from streams import dlq

    found = [d for d in dlq.list_dead(_settings(), dlq.Filter())
             if d.partition == partition and d.offset == offset]  # fmt: skip
    if not found:
        err.print(f"no dead letter at partition {partition} offset {offset}")
        raise typer.Exit(1)
    dead = found[0]
    table = Table("header", "value", title=f"dead letter {partition}/{offset}")
    for k, v in dead.headers:
        if k == schema_headers.ERROR_EXCEPTION_STACKTRACE and not stacktrace:
            continue
        table.add_row(k, v.decode("utf-8", "replace"))
    table.add_row("(key)", dead.doc_id or "-")
    table.add_row("(value size)", "dropped" if dead.value is None else f"{len(dead.value)} bytes")
    out.print(table)


@dlq_app.command("replay")
def dlq_replay(
    stage: StageOpt = None,
    exception: ExcOpt = None,
    doc_id: DocOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show, send nothing")] = False,
    rate: Annotated[float, typer.Option(help="records per second")] = 50.0,
    max_replays: Annotated[int, typer.Option(help="refuse records replayed this often")] = 3,
    group: Annotated[str, typer.Option(help="consumer group that remembers progress")] = (
        "pagestream-dlq-replay"
    ),
) -> None:
    """Send matching dead letters back to the topic they failed on (original key and value)."""
    from streams import dlq

    def each(dead: Any, verdict: str) -> None:
        if verdict != "skip":
            what = "would replay" if dry_run and verdict == "replay" else verdict
            out.print(f"{dead.partition}/{dead.offset} {dead.doc_id or '-'}: {what}")

    report = dlq.replay(
        _settings(), _dlq_filter(stage, exception, doc_id, since, until), dry_run=dry_run,
        rate_per_s=rate, max_replays=max_replays, group=group, on_each=each,
    )  # fmt: skip
    verb = "would replay" if dry_run else "replayed"
    out.print(f"{verb} {report.replayed}, refused {report.refused}, "
              f"not matching {report.skipped}")  # fmt: skip


@app.command("agents")
def agents_cmd() -> None:
    """Run one CPU agent worker (ingest, route, deliver); start more to scale out."""
    from streams.agents.app import run_worker

    s = _settings()
    # Checked up front: faust would create its changelog itself (workers starting
    # together race for it) and a worker without its input topics just sits idle.
    topology = Topology(s.topics.prefix, s.agents.app_id)
    try:
        absent = topics_apply.missing(kafka.admin(s.kafka), topology)
    except KafkaException as exc:
        err.print(f"cannot list topics on {s.kafka.bootstrap_servers}: {exc}",
                  style="red", markup=False, highlight=False)  # fmt: skip
        raise typer.Exit(1) from exc
    if absent:
        err.print(f"missing topics: {', '.join(absent)}; run `pagestream topics apply` first",
                  style="red", markup=False, highlight=False)  # fmt: skip
        raise typer.Exit(2)
    verbose = logging.getLogger().isEnabledFor(logging.INFO)
    run_worker(s, loglevel="INFO" if verbose else "WARNING")


@app.command("gpu-node")
def gpu_node_cmd() -> None:
    """Run the GPU node: micro-batches from the gpu.* topics, results out, exactly once."""
    from gpu_node.main import run_node

    # The node's own progress lines (loaded models, assignments) are worth seeing.
    logging.getLogger("gpu_node").setLevel(logging.INFO)
    raise typer.Exit(run_node())


@app.command("build-tiny-vlm")
def build_tiny_vlm_cmd(out_dir: Annotated[Path, typer.Option("--out")]) -> None:
    """Build a tiny random-weight Qwen2.5-VL checkpoint (no hub) to exercise the vLLM path."""
    from gpu_node.extraction.tiny_vlm import build_tiny_vlm

    out.print(f"tiny VLM checkpoint: {build_tiny_vlm(out_dir)}")


@app.command("eval")
def eval_models(
    n: Annotated[int, typer.Option("--n", min=8)] = 80,
    seed: Annotated[int, typer.Option(help="Use a seed training never saw.")] = 1001,
    width: Annotated[int, typer.Option(min=160)] = 960,
    speed_pages: Annotated[int, typer.Option(help="Pages timed per model; 0 skips.")] = 16,
) -> None:
    """Accuracy and pages/s of the model set on fresh held-out synthetic pages."""
    from gpu_node.evaluate import evaluate
    from gpu_node.registry import ModelRegistry
    from gpu_node.settings import GpuNodeSettings

    logging.getLogger("gpu_node").setLevel(logging.INFO)
    registry = ModelRegistry(GpuNodeSettings().models)
    r = evaluate(registry, n=n, seed=seed, width=width, speed_pages=speed_pages)
    table = Table(
        "measure",
        "value",
        title=f"{r.n_pages} pages, seed {r.seed}, width {r.width}px, all four rotations",
    )
    table.add_row("orientation accuracy", f"{r.orientation_accuracy:.3f}")
    table.add_row("classifier accuracy (after orientation)", f"{r.classifier_accuracy:.3f}")
    for name, (hits, total) in r.field_matches.items():
        table.add_row(f"rules exact match: {name}", f"{hits / max(total, 1):.3f} ({hits}/{total})")
    for name, (b1, b16) in r.throughput.items():
        table.add_row(f"{name} pages/s batch 1 / 16", f"{b1:.2f} / {b16:.2f}")
    out.print(table)


def _parse_attrs(attrs: list[str]) -> dict[str, str | int | float | bool | None]:
    parsed: dict[str, str | int | float | bool | None] = {}
    for item in attrs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--attr expects KEY=VALUE, got {item!r}")
        parsed[key] = value
    return parsed


@app.command()
def submit(
    paths: Annotated[list[Path], typer.Argument(help="Images, PDFs or folders (recursive).")],
    operation: Annotated[Operation, typer.Option()] = Operation.process,
    auto_rotate: Annotated[bool, typer.Option("--auto-rotate/--no-auto-rotate")] = True,
    backend: Annotated[Backend, typer.Option()] = Backend.auto,
    document_type: Annotated[DocumentType | None, typer.Option()] = None,
    max_pages: Annotated[int, typer.Option(min=1)] = 10,
    dpi: Annotated[int, typer.Option(min=72, max=400)] = 150,
    doc_id: Annotated[str | None, typer.Option(help="Only with a single file.")] = None,
    callback: Annotated[str | None, typer.Option(help="Webhook URL for the result.")] = None,
    attr: Annotated[list[str] | None, typer.Option(help="KEY=VALUE, repeatable.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Publish documents to docs.raw."""
    s = _settings()
    options = Options(
        auto_rotate=auto_rotate,
        backend=backend,
        document_type=document_type,
        max_pages=max_pages,
        dpi=dpi,
    )
    try:
        files = submit_mod.discover(paths)
    except submit_mod.SubmitError as exc:
        err.print(str(exc), style="red", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    with Progress(
        TextColumn("submitting"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        disable=as_json,
    ) as bar:
        task = bar.add_task("submit", total=len(files))
        try:
            subs = submit_mod.submit_paths(
                s,
                files,
                operation=operation,
                options=options,
                doc_id=doc_id,
                callback=callback,
                attributes=_parse_attrs(attr or []),
                on_each=lambda _: bar.advance(task),
            )
        except (submit_mod.SubmitError, RecordError) as exc:
            err.print(str(exc), style="red", markup=False, highlight=False)
            raise typer.Exit(1) from exc
    if as_json:
        rows = [
            {"path": str(x.path), "doc_id": x.doc_id, "size_bytes": x.size_bytes, "via": x.via}
            for x in subs
        ]
        out.print_json(json.dumps(rows))
        return
    table = Table("doc_id", "bytes", "via", "file")
    for x in subs:
        table.add_row(x.doc_id, str(x.size_bytes), x.via, str(x.path))
    out.print(table)
    out.print(f"{len(subs)} documents submitted to {Topology(s.topics.prefix).name(RAW)}")


@app.command()
def lag(
    group: Annotated[list[str] | None, typer.Option("--group", "-g")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Committed offset, log-end offset and lag per group, topic and partition."""
    groups = lag_mod.all_lag(kafka.admin(_settings().kafka), group)
    if as_json:
        out.print_json(json.dumps([g.as_dict() for g in groups]))
        return
    _print_lag(groups)


def _print_lag(groups: list[lag_mod.GroupLag]) -> None:
    for g in groups:
        table = Table(
            "topic",
            "partition",
            "committed",
            "log end",
            "lag",
            "consumer",
            title=f"group {g.group} ({g.state}), total lag {g.total_lag}",
        )
        for p in g.partitions:
            dash = "-"
            table.add_row(
                p.topic,
                str(p.partition),
                dash if p.committed is None else str(p.committed),
                str(p.log_end),
                dash if p.lag is None else str(p.lag),
                p.consumer_id or dash,
            )
        out.print(table)
    if not groups:
        out.print("no consumer groups")


@app.command()
def up(
    exit_when_done: Annotated[
        bool, typer.Option(help="Stop everything once the samples are done (no Ctrl-C wait).")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the sample results.")] = 900,
) -> None:
    """Run the whole pipeline locally: broker, topics, GPU node, agents, sample documents.

    Submits one sample document per operation (classify, extract, process, ocr on a
    two-page PDF), prints each DocumentResult and the consumer lag, then keeps the
    pipeline running until Ctrl-C (or stops at once with --exit-when-done).
    """
    from streams import local_pipeline as lp

    s = _settings()
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
            _print_lag(lp.settled_lag(s))
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
    except (lp.PipelineError, broker_mod.BrokerError) as exc:
        err.print(str(exc), style="red", markup=False, highlight=False)
        raise typer.Exit(1) from exc
    out.print("stopped cleanly")
