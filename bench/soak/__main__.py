"""`python -m bench.soak`: the soak run, then its report; exit 1 if anything grew or did
not end (see the package's docstring)."""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from bench.soak.report import cpu_shares, markdown, plot, verdicts, write_json
from bench.soak.run import Outcome, Plan, run

app = typer.Typer(add_completion=False)


def report(plan: Plan, outcome: Outcome, out: Path) -> bool:
    """Writes soak.md, soak.png and soak.json; whether everything stayed flat and ended."""
    results = verdicts(outcome.samples, plan.warm_s, plan.seconds, plan.interval_s, plan.rate)
    out.mkdir(parents=True, exist_ok=True)
    title = f"Soak: {plan.minutes:g} minutes at {plan.rate:g} documents/s"
    cpu = cpu_shares(outcome.samples, plan.warm_s, plan.seconds)
    text = markdown(results, plan.warm_s, plan.seconds, outcome.ledger, outcome.not_ended,
                    title, cpu)  # fmt: skip
    (out / "soak.md").write_text(text)
    plot(out / "soak.png", outcome.samples, results, plan.warm_s, plan.seconds, plan.interval_s)
    write_json(out / "soak.json", asdict(plan), outcome.samples, results, outcome.ledger,
               outcome.not_ended)  # fmt: skip
    typer.echo(text)
    for error in outcome.sampling_errors:
        typer.echo(f"sampling: {error}")
    if outcome.failed is not None:
        typer.echo(f"FAILED: {outcome.failed}")
    return outcome.failed is None and not outcome.not_ended and all(v.flat for v in results)


_TTL_HELP = "deliver's markers kept (s). Default: half the warm-up."
_DEADLINE_HELP = "A document missing pages ends (s). Default: 120, at most half the warm-up."
_GRACE_HELP = "Wait for every document to end (s). Default: deadline + 2 ticks + 60."


@app.command()
def main(
    minutes: Annotated[float, typer.Option(min=1, help="Length of the steady load.")] = 30.0,
    rate: Annotated[float, typer.Option(min=0.1, help="Documents submitted per second.")] = 5.0,
    out: Annotated[Path, typer.Option(help="Folder of soak.png, soak.md, soak.json.")] = Path(
        "bench/results/soak"
    ),
    hostile_share: Annotated[float, typer.Option(min=0, max=0.5)] = 0.05,
    classify_share: Annotated[float, typer.Option(min=0, max=1, help="Of ordinary ones.")] = 0.2,
    interval_s: Annotated[float, typer.Option(min=1, help="Seconds between samples.")] = 10.0,
    delivered_ttl_s: Annotated[float | None, typer.Option(help=_TTL_HELP)] = None,
    deadline_s: Annotated[float | None, typer.Option(help=_DEADLINE_HELP)] = None,
    grace_s: Annotated[float | None, typer.Option(help=_GRACE_HELP)] = None,
    seed: Annotated[int, typer.Option(help="Of the documents and the hostile draws.")] = 25,
    keep: Annotated[bool, typer.Option(help="Keep the scratch folder (logs, data).")] = False,
) -> None:
    """Run the soak and write its report; exit 1 if anything grew or did not end."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    warm_s = minutes * 60 / 3
    deadline = deadline_s or min(120.0, warm_s / 2)
    tick_s = min(30.0, deadline / 4)
    plan = Plan(minutes, rate, hostile_share, classify_share, interval_s,
                delivered_ttl_s or warm_s / 2, deadline, tick_s,
                grace_s or deadline + 2 * tick_s + 60, seed)  # fmt: skip
    scratch = Path(tempfile.mkdtemp(prefix="pagestream-soak-"))
    typer.echo(f"soak: {minutes:g} min at {rate:g} documents/s; scratch {scratch}")
    ok = report(plan, run(plan, scratch), out)
    if ok and not keep:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        typer.echo(f"logs and data kept in {scratch}")
    raise typer.Exit(0 if ok else 1)


if __name__ == "__main__":
    app()
