"""The reference paper's experiments, each a `pgmr experiment NAME` command that writes report.md,
metrics.json, per-system predictions and PNG plots into its output directory
(default `artifacts/experiments/NAME/`); `pgmr experiment results-doc` gathers them into docs/results.md.
Experiments beyond the paper (`paper=False`: CK25, a graph that is not Wikidata) are published the same way,
in sections of their own after the paper's, outside its overview table and totals.

This registry stays light to import: experiment modules (torch, matplotlib) load on use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

DEFAULT_OUT_ROOT = Path("artifacts") / "experiments"
# Versioned copies of the runs (metrics.json, report.md, plots) that docs/results.md is made from.
DEFAULT_PUBLISHED_DIR = Path("docs") / "results"


@dataclass(frozen=True)
class ExperimentInfo:
    name: str
    module: str
    summary: str
    # One of the reference paper's experiments (on Wikidata); False: beyond the paper, on another graph.
    paper: bool = True


EXPERIMENTS: dict[str, ExperimentInfo] = {
    info.name: info
    for info in (
        ExperimentInfo(
            "lcquad2-original",
            "pgmr.experiments.lcquad2_original",
            "direct vs RAG vs PGMR on LC-QuAD 2.0 test, beside the paper's Table 1",
        ),
        ExperimentInfo(
            "lcquad2-unknown-uri",
            "pgmr.experiments.lcquad2_unknown_uri",
            "LC-QuAD 2.0 re-split so that no test entity occurs in training; train, then evaluate",
        ),
        ExperimentInfo(
            "qald10",
            "pgmr.experiments.qald10",
            "transfer to QALD-10 test, and pgmr fine-tuned on QALD-10 train, answers executed on a store (+ a chat LLM when given)",
        ),
        ExperimentInfo(
            "distractors",
            "pgmr.experiments.distractors",
            "one set of model outputs resolved against memories grown 1x..9x around the gold entities",
        ),
        ExperimentInfo(
            "refusal",
            "pgmr.experiments.refusal",
            "refusal-threshold sweep over answerable and unanswerable (gold entities or relations removed) questions, every draft resolved as ask resolves it",
        ),
        ExperimentInfo(
            "ck25",
            "pgmr.experiments.ck25",
            "CK25, TEXT2SPARQL'25's corporate graph (not Wikidata): the oracle and chat LLMs told the graph's schema, answers run on the graph",
            paper=False,
        ),
    )
}


def experiment_module(name: str) -> ModuleType:
    """The module of an experiment (it has NAME, TITLE, run(...), tables(doc), report(doc))."""
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; expected one of {', '.join(EXPERIMENTS)}")
    return importlib.import_module(EXPERIMENTS[name].module)


def default_out_dir(name: str, root: Path = DEFAULT_OUT_ROOT) -> Path:
    return root / name


__all__ = ["DEFAULT_OUT_ROOT", "EXPERIMENTS", "ExperimentInfo", "default_out_dir", "experiment_module"]
