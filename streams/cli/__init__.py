"""`pagestream`: the command line, one module per command group.

    pagestream broker start|stop|status   embedded KRaft broker: 1 node or --nodes 3 (broker.py)
    pagestream topics apply|list          topics declared in streams/topics.py (topics.py)
    pagestream acls apply|show            principals and rights (security/acls.py) (acls.py)
    pagestream schemas export DIR         JSON Schemas of the records (schemas.py)
    pagestream submit FILE...             publish documents to docs.raw (submit.py)
    pagestream results                    the latest result per document (results.py)
    pagestream status DOC_ID              where a document's pages are (status.py)
    pagestream lag                        consumer lag per group and topic (lag.py)
    pagestream exporter                   lag and offsets for Prometheus (exporter.py)
    pagestream dlq list|show|replay       dead letters (dlq.py)
    pagestream agents                     one CPU agent worker (agents.py)
    pagestream up                         the whole pipeline locally with samples (up.py)
    pagestream gpu-node                   the GPU node              (gpu_node/cli.py)
    pagestream synth | train-classifier | train-orientation | eval | build-tiny-vlm
                                          models and synthetic data (gpu_node/cli.py)

What `results`, `up` and `lag` print is laid out in display.py; the consoles, the
settings and the progress bar are in common.py.

Packages above streams/ add their commands through the `pagestream.commands` entry
point (a function that registers them on the app), so streams never imports them.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from typing import Annotated

import typer
from confluent_kafka import KafkaException

from streams.cli import (
    acls,
    agents,
    broker,
    dlq,
    exporter,
    lag,
    results,
    schemas,
    status,
    submit,
    topics,
    up,
)
from streams.cli.common import err
from streams.kafka.errors import explain
from streams.settings import Settings

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="pagestream: a Kafka consumer-group pipeline for document AI.",
    # A traceback's locals would show client configs, passwords included.
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


for _module in (
    broker,
    topics,
    acls,
    schemas,
    submit,
    results,
    status,
    lag,
    dlq,
    agents,
    exporter,
    up,
):
    _module.register(app)
for _entry in entry_points(group="pagestream.commands"):
    _entry.load()(app)


def main() -> None:
    try:
        app(prog_name="pagestream")
    except KafkaException as exc:
        # One line that names the problem (a refused login, a missing right) instead of
        # a traceback; never a secret.
        err.print(explain(exc, Settings().kafka, probe=True), style="red", markup=False,
                  highlight=False)  # fmt: skip
        raise SystemExit(1) from None
