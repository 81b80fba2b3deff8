"""The `pgmr` console script."""

from __future__ import annotations

from pathlib import Path

import typer

from pgmr.cli import ensemble, experiment, kg, llm, memory
from pgmr.cli.ask import ask
from pgmr.cli.common import Settings
from pgmr.cli.convert import convert
from pgmr.cli.demo import demo
from pgmr.cli.evaluate import evaluate
from pgmr.cli.generate import generate
from pgmr.cli.mcp import mcp
from pgmr.cli.resolve import resolve
from pgmr.cli.serve import serve
from pgmr.cli.synthesize import synthesize
from pgmr.cli.train import pack, train
from pgmr.cli.train_default import train_default
from pgmr.cli.train_verifier import train_verifier

app = typer.Typer(
    name="pgmr",
    help="Questions to SPARQL over Wikidata with post-generation memory retrieval (no hallucinated IDs).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    data_dir: Path | None = typer.Option(
        None, "--data-dir", envvar="PGMR_DATA_DIR", help="pgmr data directory (default: ../shared/data)"
    ),
) -> None:
    ctx.obj = Settings(data_dir_option=data_dir)


app.command()(convert)
app.command()(resolve)
app.add_typer(memory.app, name="memory")
app.add_typer(kg.app, name="kg")
app.add_typer(llm.app, name="llm")
app.add_typer(experiment.app, name="experiment")
app.command()(synthesize)
app.command()(train)
app.command()(pack)
app.command(name="train-verifier")(train_verifier)
app.command(name="train-default")(train_default)
app.add_typer(ensemble.app, name="ensemble")
app.command()(generate)
app.command()(ask)
app.command()(serve)
app.command()(mcp)
app.command(name="eval")(evaluate)

app.command()(demo)
