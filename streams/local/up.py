"""`pagestream up`: the whole pipeline on this machine, on the embedded defaults.

Broker (started unless one is running), topics, one GPU node and one agent worker
as child processes (`pagestream gpu-node`, `pagestream agents`: the same
commands an operator runs in production), then sample documents through it.
Children get their own session so a Ctrl-C in the terminal reaches only this
process, which then stops them in order: its own Kafka clients first (a client
still open when the broker goes logs librdkafka's "Connection refused" until
exit), then agents and node (they commit their last work), the broker last, and
only if it was started here.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from schemas import DocumentResult, DocumentType, Operation, Options, RecordError, decode
from streams.admin import topics_apply
from streams.admin.lag import GroupLag, all_lag
from streams.admin.records import record_counter
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.local import broker
from streams.local.ready import wait_until_answering
from streams.security import acls, acls_apply, credentials
from streams.settings import Settings, child_environment
from streams.topics import RESULTS

log = logging.getLogger(__name__)

SAMPLE_SEED = 7
SAMPLE_WIDTH = 800  # large enough for the rules extractor's labels, small enough for CPU


class PipelineError(RuntimeError):
    """A child process died or results did not arrive in time."""


@dataclass(frozen=True)
class Sample:
    name: str
    data: bytes
    operation: Operation
    options: Options


def samples() -> list[Sample]:
    """One document per operation; OCR on a scanned two-page PDF (RapidOCR on the GPU
    node) and on born-digital reports (answered from their text layers by the agents,
    one with a table and a running head)."""
    import io

    from synth.dataset import generate
    from synth.layout_pages import report_page
    from synth.pdf import generate_pdf, report_pages, text_pdf

    def png(image: object) -> bytes:
        buf = io.BytesIO()
        image.save(buf, format="PNG")  # type: ignore[attr-defined]
        return buf.getvalue()

    cnh, rg_back, cin = generate(
        SAMPLE_SEED,
        3,
        doc_types=[DocumentType.cnh_front, DocumentType.rg_back, DocumentType.cin_front],
        rotations=[0],
        width=SAMPLE_WIDTH,
    )
    (turned,) = generate(
        SAMPLE_SEED + 1, 1, doc_types=[DocumentType.cin_front], rotations=[90], width=SAMPLE_WIDTH
    )
    pdf, _ = generate_pdf(
        SAMPLE_SEED,
        2,
        page_types=[DocumentType.letter, DocumentType.invoice],
        rotations=[0],
        width=SAMPLE_WIDTH,
    )
    return [
        Sample("classify-cnh", png(cnh.image), Operation.classify, Options()),
        Sample(
            "extract-rg-back",
            png(rg_back.image),
            Operation.extract,
            Options(auto_rotate=False, document_type=DocumentType.rg_back),
        ),
        Sample("process-cin", png(cin.image), Operation.process, Options()),
        Sample("process-cin-rotated", png(turned.image), Operation.process, Options()),
        Sample("ocr-pdf-2-pages", pdf, Operation.ocr, Options(max_pages=4)),
        Sample(
            "ocr-born-digital-report",
            text_pdf(report_pages(SAMPLE_SEED, 2)),
            Operation.ocr,
            Options(max_pages=4),
        ),
        # The layout reader: its table comes back as a table, its running head set
        # aside (kept here as a comment, so the preview shows what was dropped).
        Sample("ocr-table-and-header", report_page(), Operation.ocr, Options(keep_headers=True)),
    ]


def _command(*args: str) -> list[str]:
    # The interpreter running us, so the children use the same environment.
    return [sys.executable, "-m", "streams", *args]


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def spawn(
    name: str,
    args: list[str],
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    without: Collection[str] = (),
) -> Child:
    """`env`: settings for this child only, through its environment (never its command
    line, where `ps` shows them); `without`: variables of ours it must not inherit."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            _command(*args),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=None if env is None else child_environment(env, without),
        )
    return Child(name, proc, log_path)


def stop_children(children: list[Child], timeout_s: float = 40.0) -> None:
    for child in children:
        if child.proc.poll() is None:
            child.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for child in children:
        try:
            child.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within %.0f s: killed", child.name, timeout_s)
            os.killpg(child.proc.pid, signal.SIGKILL)
            child.proc.wait()


@contextmanager
def running_pipeline(settings: Settings, log_dir: Path) -> Iterator[list[Child]]:
    """Broker, topics, GPU node and one agent worker; everything stopped on exit.

    The caller closes its own Kafka clients inside the block: one still open while the
    broker stops logs librdkafka's "Connection refused" until the process exits."""
    started_broker = broker.status(settings.broker) is None
    broker.start(settings.broker)
    children: list[Child] = []
    secure = settings.broker.secure
    # The gateway's view lives beside the logs: one pipeline's, never shared with another
    # `up` on another broker. Its keys are the pipeline's keys file, the one
    # `pagestream api-keys` finds with the same settings (beside the broker's data too).
    api_env = {
        # A development pipeline: reachable from this machine only, whatever the default.
        "PAGESTREAM_API__HOST": "127.0.0.1",
        "PAGESTREAM_API__VIEW_FILE": str(api_folder(settings) / "view.sqlite"),
        "PAGESTREAM_API__KEYS_FILE": str(settings.api.keys_file),
    }
    try:
        _provision(settings)
        for name, role, extra in (
            ("gpu-node", acls.GPU_NODE, {}),
            ("agents", acls.AGENTS, {}),
            ("api", acls.API, api_env),
        ):
            if not secure:
                children.append(spawn(name, [name], log_dir, extra or None))
                continue
            # The child reads its role's file itself: the password is in no process's
            # environment or command line. Our own Kafka variables (an operator's, say)
            # would win over the file, so they are not passed on.
            creds = credentials.role_file(settings.broker, role)
            ours = credentials.role_env(settings.broker, role)
            env = {"PAGESTREAM_ENV_FILE": str(creds), **extra}
            children.append(spawn(name, [name], log_dir, env, without=ours))
        yield children
    finally:
        stop_children(children)
        if started_broker:
            broker.stop(settings.broker)


def api_folder(settings: Settings) -> Path:
    return settings.broker.data_dir.parent / "up-api"


def local_api_key(settings: Settings) -> str:
    """The key of the local tenant `local` on `up`'s gateway: made once (by the gateway's
    own `pagestream api-keys create`), then kept in a file only its owner reads."""
    folder, keys_file = api_folder(settings), settings.api.keys_file
    saved = folder / "local.key"
    if saved.exists() and _live_in(keys_file, saved.read_text().strip()):
        return saved.read_text().strip()
    env = {"PAGESTREAM_API__KEYS_FILE": str(keys_file)}
    made = subprocess.run(  # noqa: S603 - our own interpreter and module
        _command("api-keys", "create", "--tenant", "local"),
        env=child_environment(env),
        capture_output=True,
        check=True,
        timeout=60,
    )
    key = made.stdout.decode().strip()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(saved, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key


def _live_in(keys_file: Path, key: str) -> bool:
    """Whether `key` is a live key of `keys_file`: not one of a lost or another keys file
    (before the pipeline had one, `up` kept its own), nor revoked. Read as JSON here:
    streams never imports the gateway's KeyStore."""
    try:
        listed = json.loads(keys_file.read_text())["keys"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    key_id = key.split("_")[1] if key.count("_") >= 2 else ""
    return any(k.get("key_id") == key_id and not k.get("revoked_at") for k in listed)


def api_ready(settings: Settings, timeout_s: float = 60.0) -> str | None:
    """The gateway's URL once it answers ready, or None if it did not in `timeout_s`."""
    url = f"http://127.0.0.1:{settings.api.port}"
    return (
        url if wait_until_answering(f"{url}/readyz", timeout_s=timeout_s, interval_s=0.5) else None
    )


def _provision(settings: Settings) -> None:
    """Topics, and on a secure broker users and ACLs. Its admin client lives only as long
    as this call: kept in running_pipeline's frame, it would outlive the broker."""
    admin = kafka.admin(credentials.as_role(settings, acls.ADMIN).kafka)
    topics_apply.apply(
        admin,
        settings.topology,
        settings.topics.replication_factor,
        settings.topics.min_insync_replicas,
        max_record_bytes=settings.kafka.max_record_bytes,
    )
    if settings.broker.secure:
        passwords = credentials.ensure(settings.broker)
        passwords.pop(acls.ADMIN)
        acls_apply.apply(admin, acls.for_settings(settings), passwords)


def submit_samples(settings: Settings, run_id: str) -> dict[str, Sample]:
    """Submit the samples under doc ids unique to this run; returns them by doc_id."""
    sub = Submitter(credentials.as_role(settings, acls.PRODUCER))
    by_id: dict[str, Sample] = {}
    for sample in samples():
        doc_id = f"sample-{run_id}-{sample.name}"
        sub.submit_bytes(
            sample.data, operation=sample.operation, options=sample.options, doc_id=doc_id
        )
        by_id[doc_id] = sample
    sub.flush()
    return by_id


@contextmanager
def results_from_now(settings: Settings) -> Iterator[Callable[[float], list[DocumentResult]]]:
    """A reader of docs.results positioned at the current end, before anything is submitted
    (docs.results is compacted and may hold every result ever made); its consumer is
    closed when the block ends."""
    topic = settings.topology.name(RESULTS)
    reader = credentials.as_role(settings, acls.READER).kafka
    consumer = kafka.consumer(reader, f"pagestream-up-{uuid.uuid4().hex[:8]}")
    try:
        yield _results_poll(consumer, topic)
    finally:
        consumer.close()


def _results_poll(consumer: Consumer, topic: str) -> Callable[[float], list[DocumentResult]]:
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    # A broker that just started or just created the topic answers "not leader"
    # for a moment.
    watermarks = retry(
        retry=retry_if_exception_type(KafkaException),
        stop=stop_after_delay(60),
        wait=wait_exponential(multiplier=0.2, max=2),
        reraise=True,
    )(consumer.get_watermark_offsets)
    start = []
    for p in parts:
        _, high = watermarks(TopicPartition(topic, p), timeout=10)
        start.append(TopicPartition(topic, p, high))
    consumer.assign(start)

    def poll(timeout_s: float) -> list[DocumentResult]:
        got = []
        for msg in consumer.consume(100, timeout_s):
            if msg.error() is not None or msg.value() is None:
                continue
            try:
                got.append(decode(DocumentResult, msg.value()))
            except RecordError:
                log.warning("unreadable record in %s at offset %d", topic, msg.offset())
        return got

    return poll


def wait_for_results(
    poll: Callable[[float], list[DocumentResult]],
    doc_ids: set[str],
    children: list[Child],
    *,
    timeout_s: float,
    stop: Callable[[], bool],
    on_result: Callable[[DocumentResult], None],
) -> dict[str, DocumentResult]:
    results: dict[str, DocumentResult] = {}
    deadline = time.monotonic() + timeout_s
    while len(results) < len(doc_ids) and not stop():
        for child in children:
            if child.proc.poll() is not None:
                raise PipelineError(
                    f"{child.name} exited with {child.proc.returncode}; "
                    f"last lines of {child.log_path}:\n{child.tail()}"
                )
        if time.monotonic() > deadline:
            missing = sorted(doc_ids - set(results))
            raise PipelineError(f"no result after {timeout_s:.0f} s for {missing}")
        for result in poll(0.5):
            if result.doc_id in doc_ids and result.doc_id not in results:
                results[result.doc_id] = result
                on_result(result)
    return results


def settled_lag(settings: Settings, timeout_s: float = 60.0) -> list[GroupLag]:
    """The agents' and the GPU node's lag once the agents' commits stopped moving.

    faust commits on a timer (about every 3 s), so right after the last result its
    offsets trail, and the leader's tick lands on every docs.pages.done partition every
    tick_interval_s. Lag counts records: the commit marker after the GPU node's last
    transaction is not lag, so a drained pipeline reads 0; until every group does (or a
    minute, a tick interval and a rebalance, is up) this waits, and returns the reading
    it judged. It used to read again after judging, and on CI that second reading once
    caught a tick written in between and not yet committed (lag 1 on each
    docs.pages.done partition).
    """
    topo = settings.topology
    # As the operator (admin on a secure broker): the monitor role may not read records,
    # so it would count the commit markers of the GPU node's transactions as lag.
    operator = credentials.as_role(settings, acls.ADMIN).kafka
    admin = kafka.admin(operator)
    counter = record_counter(operator)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            # The reading returned is the one judged: a second one read after it could
            # find a tick the leader wrote in between, not yet committed.
            lags = all_lag(admin, [*topo.agents_groups, settings.gpu_group],
                           counter)  # fmt: skip
            if all(g.total_lag == 0 for g in lags) or time.monotonic() > deadline:
                return lags
            time.sleep(1.0)
    finally:
        counter.close()
