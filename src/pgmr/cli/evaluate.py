"""`pgmr eval`: score predictions (from `pgmr generate`) against gold queries and, with a store, answers."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from pgmr.cli.common import Settings, console, out, print_error, progress_bar
from pgmr.datasets import DatasetError, QARecord, load_any
from pgmr.datasets.loaders import NAMED_DATASETS
from pgmr.jsonl import JsonlError, read_jsonl

if TYPE_CHECKING:
    from pgmr.evaluation.metrics import EvaluationResult


def _gold_from_rows(rows: list[dict[str, Any]]) -> list[QARecord]:
    """Without --gold: the `gold` SPARQL that `pgmr generate` copies into each row."""
    records = []
    for row in rows:
        gold = row.get("gold")
        if not isinstance(gold, str) or not gold.strip():
            raise DatasetError(f"row {row.get('id')!r} has no 'gold' query; pass --gold DATASET")
        records.append(
            QARecord(str(row.get("id")), str(row.get("question") or ""), gold.strip(), "predictions")
        )
    return records


def _dataset_id(gold: str | None, predictions: Path) -> str:
    """qald.json's dataset id: the gold's name, or its file's (the predictions' when the rows hold the gold)."""
    if gold is None:
        return predictions.stem
    return gold if gold in NAMED_DATASETS else Path(gold).stem


def _command(
    predictions: Path,
    gold: str | None,
    out_dir: Path,
    store: str | None,
    timeout: float,
    fmt: str,
    catalog: bool,
) -> str:
    args = ["pgmr", "eval", str(predictions)]
    if gold is not None:
        args += ["--gold", gold]
    if fmt != "auto":
        args += ["--format", fmt]
    args += ["-o", str(out_dir)]
    if store is not None:
        args += ["--store", store, "--timeout", f"{timeout:g}"]
    if not catalog:
        args.append("--no-catalog")
    return shlex.join(args)


def evaluate(
    ctx: typer.Context,
    predictions: Path = typer.Argument(
        ..., help="Predictions JSONL from `pgmr generate` ({id, prediction, ...})"
    ),
    gold: str | None = typer.Option(
        None,
        "--gold",
        "-g",
        help=f"Gold dataset: a name ({', '.join(NAMED_DATASETS)}) or a file; default: each row's 'gold'",
    ),
    out_dir: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="Directory for predictions.jsonl, metrics.json, report.md and two standard exports: "
        "t2s-metrics.jsonl (t2s-metrics input) and qald.json (QALD JSON for GERBIL; answers with --store)",
    ),
    fmt: str = typer.Option("auto", "--format", help="Format of a gold file: auto | lcquad2 | qald | jsonl"),
    store: str | None = typer.Option(
        None, help="Execute queries for answer P/R/F1: an endpoint URL, a store directory or an .nt/.ttl file"
    ),
    timeout: float = typer.Option(30.0, min=0.1, help="Seconds per query on --store"),
    catalog: bool = typer.Option(
        True, "--catalog/--no-catalog", help="Count IDs unknown to the memory files (needs the data dir)"
    ),
) -> None:
    """Query EM (primary), SQM, BLEU, URI EM, hallucinated IDs, refusals; answer P/R/F1 with --store.
    Also writes t2s-metrics.jsonl and qald.json for scoring the run with t2s-metrics and GERBIL."""
    from pgmr.evaluation.exports import answers_executed, write_exports
    from pgmr.evaluation.metrics import EvaluationError
    from pgmr.evaluation.metrics import evaluate as run_evaluation
    from pgmr.evaluation.report import write_outputs

    settings: Settings = ctx.obj
    if not predictions.is_file():
        print_error(f"predictions file {predictions} does not exist")
        raise typer.Exit(2)
    try:
        rows = list(read_jsonl(predictions))
        if not rows:
            raise DatasetError(f"{predictions} has no rows")
        needs_data = catalog or (gold is not None and gold in NAMED_DATASETS)
        data_dir = settings.data_dir if needs_data else None
        gold_records = (
            list(load_any(gold, data_dir, fmt).records) if gold is not None else _gold_from_rows(rows)
        )
        known = None
        if catalog:
            from pgmr.kg.catalog import CatalogError, LabelCatalog

            try:
                known = LabelCatalog.from_data_dir(data_dir)  # type: ignore[arg-type]
            except CatalogError as exc:
                raise DatasetError(
                    f"{exc} (pass --no-catalog to skip the catalog hallucination rate)"
                ) from None
    except (DatasetError, JsonlError, FileNotFoundError, UnicodeDecodeError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None

    sparql_store = _open_store(store, timeout) if store is not None else None
    try:
        with progress_bar() as bar:
            task = bar.add_task("scoring", total=len(rows))
            result = run_evaluation(
                rows,
                gold_records,
                catalog=known,
                store=sparql_store,
                timeout=timeout,
                progress=lambda k: bar.advance(task, k),
            )
    except EvaluationError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    finally:
        if sparql_store is not None:
            sparql_store.close()

    command = _command(predictions, gold, out_dir, store, timeout, fmt, catalog)
    inputs = {"predictions": str(predictions), "gold": gold or "rows' 'gold' field", "store": store}
    title = f"pgmr eval: {predictions.name}" + (f" vs {gold}" if gold else "")
    write_outputs(out_dir, rows, result, command=command, inputs=inputs, title=title)
    write_exports(out_dir, rows, result, dataset_id=_dataset_id(gold, predictions))
    out.print(overall_table(result, title))
    if result.gold_without_prediction:
        console.print(f"{result.gold_without_prediction} gold records have no prediction (not scored)")
    console.print(
        f"wrote predictions.jsonl, metrics.json, report.md, t2s-metrics.jsonl and qald.json to {out_dir}"
    )
    if not answers_executed(result):
        console.print("qald.json has no answers: pass --store to fill them from the generated queries")


def overall_table(result: EvaluationResult, title: str) -> Table:
    """The overall metrics of a result, as report.md's first table has them."""
    from pgmr.evaluation.report import OVERALL_ROWS, fmt

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, label, kind in OVERALL_ROWS:
        if key in result.overall:
            table.add_row(label, fmt(result.overall.get(key), kind))
    return table


def _open_store(spec: str, timeout: float) -> Any:
    try:
        from pgmr.stores import StoreError, open_store
    except ImportError:
        print_error("--store needs pgmr.stores, which this installation lacks")
        raise typer.Exit(2) from None
    try:
        return open_store(spec, timeout=timeout)
    except (StoreError, OSError, ValueError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
