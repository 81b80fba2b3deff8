"""docs/results.md, generated from every experiment's metrics.json (`pgmr experiment results-doc`).

Experiments write to a scratch directory (artifacts/experiments/NAME/, not versioned: predictions are large).
`publish` copies each run's metrics.json, report.md and plots into a versioned directory (docs/results/NAME/),
and the document is generated from there, so an experiment that is not re-run keeps its last published
results instead of falling back to "not run" on a machine that never ran it.

Each experiment gets its tables (the same ones its report.md shows), its command and wall time, or "not run"
when it has no published metrics yet; the LC-QuAD 2.0 table sits beside the paper's Table 1, the PGMR-over-direct
margins of the two LC-QuAD splits side by side, and every known deviation from the paper's setup is named.
Experiments beyond the paper (ExperimentInfo.paper False: CK25) follow in sections of their own, with an overview
table of their own, outside the paper's totals.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pgmr.experiments import EXPERIMENTS, experiment_module
from pgmr.experiments.common import PAPER_TABLE1, fmt_decoding, fmt_seconds, md_table

METRICS_FILE = "metrics.json"
REPORT_FILE = "report.md"


class ResultsDocError(ValueError):
    """A metrics.json that cannot be read."""


def load_metrics(experiments_dir: Path) -> dict[str, dict[str, Any] | None]:
    """name -> metrics document (None when the experiment has not been run)."""
    docs: dict[str, dict[str, Any] | None] = {}
    for name in EXPERIMENTS:
        path = experiments_dir / name / METRICS_FILE
        if not path.is_file():
            docs[name] = None
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResultsDocError(f"cannot read {path}: {exc}") from None
        if not isinstance(doc, dict) or doc.get("experiment") != name:
            raise ResultsDocError(f"{path} is not the metrics of experiment {name!r}")
        docs[name] = doc
    return docs


def publish(experiments_dir: Path, published_dir: Path) -> list[str]:
    """Copy each experiment's metrics.json, report.md and plots from `experiments_dir` into `published_dir`
    (one directory per experiment, replaced whole); returns the names published. Experiments without a
    metrics.json in `experiments_dir`, or with one older than the published run, keep what `published_dir` holds."""
    from pgmr.jsonl import atomic_write_bytes

    published = load_metrics(published_dir) if published_dir.is_dir() else {}
    fresh = {
        name: doc
        for name, doc in load_metrics(experiments_dir).items()
        # A run older than the published one (a stale quick run left in the scratch directory) is not published.
        if doc is not None
        and str(doc.get("started_at", "")) >= str((published.get(name) or {}).get("started_at", ""))
    }
    for name, doc in fresh.items():
        dataset = str((doc.get("settings") or {}).get("dataset", ""))
        if "validation" in dataset:
            raise ResultsDocError(
                f"{experiments_dir / name} is a run on {dataset}: validation runs choose settings, only test "
                "runs are published; move it out of the experiments directory"
            )
    for name, doc in fresh.items():
        source, target = experiments_dir / name, published_dir / name
        files = [METRICS_FILE, REPORT_FILE, *(str(p) for p in doc.get("plots", []))]
        missing = [f for f in files if not (source / f).is_file()]
        if missing:
            raise ResultsDocError(f"{source} lacks {', '.join(missing)} named by its {METRICS_FILE}")
        target.mkdir(parents=True, exist_ok=True)
        for stale in target.iterdir():  # plots of an earlier run that this one no longer makes
            if stale.is_file() and stale.name not in files:
                stale.unlink()
        # metrics.json last: a copy interrupted half way leaves the old metrics, which name their own plots.
        for file in sorted(files, key=lambda f: f == METRICS_FILE):
            atomic_write_bytes(target / file, (source / file).read_bytes())
    return sorted(fresh)


def _query_em(doc: Mapping[str, Any] | None, mode: str) -> tuple[float, Mapping[str, Any]] | None:
    system = (doc or {}).get("systems", {}).get(mode) or {}
    if system.get("status") != "ok":
        return None
    return 100 * float(system["overall"]["query_em"]), system


def margins_table(docs: Mapping[str, Mapping[str, Any] | None]) -> str | None:
    """PGMR's Query EM over direct's on the original and the unknown-URI split, as points and as a ratio
    (None when neither split has both systems)."""
    rows = []
    for name, split in (("lcquad2-original", "original"), ("lcquad2-unknown-uri", "unknown-URI")):
        # The unknown-URI split's row of the default's recipe, where it has one (its `pgmr` row is then the
        # seq2seq member alone); the original split's `pgmr` row is the shipped default.
        pgmr = _query_em(docs.get(name), "pgmr-ensemble") or _query_em(docs.get(name), "pgmr")
        direct = _query_em(docs.get(name), "direct")
        if pgmr is None or direct is None:
            continue
        (p, p_sys), (d, d_sys) = pgmr, direct
        ratio = f"{p / d:.1f}x" if d > 0 else "inf (direct 0)"
        steps = f"{p_sys.get('train_steps', '?')} / {d_sys.get('train_steps', '?')}"
        rows.append(
            [split, p_sys["overall"].get("n", "?"), f"{p:.2f}", f"{d:.2f}", f"{p - d:+.2f}", ratio, steps]
        )
    if not rows:
        return None
    return md_table(
        [
            "split",
            "questions",
            "PGMR Query EM",
            "direct Query EM",
            "PGMR - direct (points)",
            "PGMR / direct",
            "training steps (pgmr / direct)",
        ],
        rows,
        left=(0,),
    )


def evaluated_models(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The trained models an experiment evaluated: its systems' entries, or the one model its outputs came
    from (`source`: distractors, refusal)."""
    entries = [s for s in (doc.get("systems") or {}).values() if s.get("status") == "ok" and s.get("model")]
    source = doc.get("source")
    if isinstance(source, Mapping) and source.get("model"):
        entries.append(source)
    return entries


def _model_description(e: Mapping[str, Any]) -> str:
    if "train_steps" not in e:  # a served model (the chat-LLM row): nothing of it was trained here
        return (
            f"`{e.get('model')}` ({e.get('mode')}; a served chat model, prompted "
            f"{e.get('prompting') or 'few-shot'}, not trained here)"
        )
    if e.get("members"):  # an ensemble: each member's training, then the reranked choice
        members = "; ".join(
            f"{m.get('name')} `{m.get('model')}` ({m.get('preset')}, {m.get('train_steps')} training steps, "
            f"{fmt_seconds(m.get('train_wall_seconds'))})"
            for m in e["members"]
        )
        verifier = e.get("verifier")
        if verifier:
            members += (
                f"; draft verifier `{verifier.get('model')}` ({verifier.get('train_steps')} training steps, "
                f"{fmt_seconds(verifier.get('train_wall_seconds'))})"
            )
        return (
            f"`{e.get('model')}` ({e.get('mode')}, an ensemble whose drafts are resolved and reranked: {members}; "
            f"decoding: {fmt_decoding(e) or 'not recorded'})"
        )
    return (
        f"`{e.get('model')}` ({e.get('mode')}, {e.get('train_steps')} training steps, "
        f"{fmt_seconds(e.get('train_wall_seconds'))}; decoding: {fmt_decoding(e) or 'not recorded'})"
    )


def models_line(doc: Mapping[str, Any]) -> str | None:
    described = [_model_description(e) for e in evaluated_models(doc)]
    return "Models: " + "; ".join(described) + "." if described else None


def total_wall_time(docs: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """A paragraph: the experiments' summed wall time, and the training time of the models they evaluated
    (each model once, from its model card), which the experiment commands do not include when the models were
    trained beforehand."""
    ran = [doc for doc in docs.values() if doc is not None]
    if not ran:
        return []
    total = sum(float(doc.get("wall_seconds") or 0) for doc in ran)
    # An ensemble counts as its members, so a member also evaluated alone is counted once.
    trained = {
        str(entry.get("trained_by") or entry.get("model")): float(entry["train_wall_seconds"])
        for doc in ran
        for model in evaluated_models(doc)
        for entry in [
            *(model.get("members") or [model]),
            *([model["verifier"]] if model.get("verifier") else []),
        ]
        if entry.get("train_wall_seconds")
    }
    line = f"Total wall time of the published runs: {fmt_seconds(total)}."
    if any(e.get("carried_from") for doc in ran for e in (doc.get("systems") or {}).values()):
        line += " Rows kept from an earlier run (`--keep-from`) were timed in that run, not in this total."
    if trained:
        line += (
            f" Training the {len(trained)} models they evaluate took {fmt_seconds(sum(trained.values()))} of wall "
            "time in all (per model card, each model once; models trained side by side shared the machine's "
            "2 cores)."
        )
    return [line, ""]


def _models(docs: Mapping[str, Mapping[str, Any] | None]) -> tuple[str, str]:
    """(parameter counts, training times) of the models lcquad2-original evaluated, as text."""
    doc = docs.get("lcquad2-original") or {}
    ran = [s for s in doc.get("systems", {}).values() if s.get("status") == "ok"]
    counts = sorted({s["parameters"] for s in ran if s.get("parameters")})
    sizes = " / ".join(f"{c / 1e6:.1f}M" for c in counts) if counts else "31M"
    walls = [
        f"{s.get('mode')} {fmt_seconds(s['train_wall_seconds'])}" for s in ran if s.get("train_wall_seconds")
    ]
    return sizes, ", ".join(walls) if walls else "a budget of 105 minutes each"


def deviations(docs: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    sizes, walls = _models(docs)
    return [
        "- **Data.** LC-QuAD 2.0 train is a rebuilt copy (23,417 records from public copies, in quality tiers; "
        "records with unresolved IDs are dropped), not the original 24,180; test is the 5,715 of 6,046 test "
        "records that have a question. Training records whose IDs have no label in the memory files cannot be "
        "converted and are left out (the model cards count them).",
        "- **Encoder.** The memory embeds labels and descriptions with all-MiniLM-L6-v2 (384 dimensions, bundled "
        "offline); the generators read questions with the same pretrained MiniLM encoder.",
        f"- **Model size and training.** Our generators are {sizes}-parameter models trained on 2 CPU cores "
        f"({walls} of training), where the paper fine-tunes a pretrained T5-small (60M parameters): the "
        "baselines and the seq2seq pgmr model are the pretrained MiniLM encoder + a 2-layer decoder trained "
        "from scratch; the default pgmr generator is an ensemble of that seq2seq model and a structured one "
        "(the MiniLM encoder with template and slot heads), whose two drafts are resolved and reranked "
        "(docs/generators.md). The pgmr models write labels only, no descriptions.",
        "- **Hallucination.** Ours counts predicted IDs unknown to the label catalog (the memory files: 81,762 "
        "entities, 13,951 properties), not to all of Wikidata: a real ID missing from the files counts as "
        "hallucinated, so it overstates relative to the paper's measure. A second kind, IDs not in the gold "
        "query, is reported beside it.",
        "- **Knowledge graph.** No Wikidata endpoint is reachable offline: QALD-10 answers are executed on a "
        "196-triple graph derived from the gold answers, which only checks execution end to end.",
        "- **Large models.** The paper's Llama 3.1 8B and GPT-4o rows are not reproduced (no such model offline); "
        "the chat-LLM backend runs any OpenAI-compatible server (`pgmr experiment qald10 --server URL "
        "--server-model NAME`).",
        "- **Quick runs.** A run with `--limit N` scores only the first N questions; its numbers are not "
        "comparable to the paper's.",
    ]


def paper_table() -> str:
    rows = [
        [name, f"{v['query_em']:.2f}", f"{v['bleu']:.2f}", f"{v['uri_em']:.2f}", f"{v['hallucination']:.2f}"]
        for name, v in PAPER_TABLE1.items()
    ]
    return md_table(["paper (v1, Table 1)", "Query EM", "BLEU", "URI EM", "hallucination"], rows)


def results_document(
    published_dir: Path,
    *,
    plots_prefix: str | None = None,
    docs: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> str:
    """The markdown of docs/results.md from the metrics under `published_dir` (or `docs`, when already read
    from there); plots are linked as `plots_prefix/NAME/PLOT` (default: `published_dir`'s name, right for
    docs/results.md beside docs/results/)."""
    docs = load_metrics(published_dir) if docs is None else docs
    prefix = published_dir.name if plots_prefix is None else plots_prefix
    parts = [
        "# Results",
        "",
        "Generated by `pgmr experiment results-doc` from `"
        + str(published_dir)
        + "/*/metrics.json` (published copies of the runs' `artifacts/experiments/NAME/`); do not edit by hand. "
        "Each experiment's report.md and plots are published beside its metrics; scored predictions stay in "
        "the run's own directory.",
        "",
        "## Overview",
        "",
    ]
    paper = {name: docs.get(name) for name, info in EXPERIMENTS.items() if info.paper}
    beyond = [name for name, info in EXPERIMENTS.items() if not info.paper]
    parts += [
        _overview_table([_overview_row(name, doc) for name, doc in paper.items()]),
        "",
        *total_wall_time(paper),
        "Prior: every run above resolved against a memory built from the data directory's label files by "
        "`pgmr memory build`, whose prominence prior counts IDs in training gold queries (LC-QuAD 2.0 train "
        "without its validation carve; for lcquad2-unknown-uri, the split's own training part without its "
        "validation carve). None used a "
        "memory built from a Wikidata dump, whose prior blends its sitelink counts with ID age (docs/scale.md).",
        "",
    ]
    if beyond:
        kept = any(
            e.get("carried_from")
            for name in beyond
            for e in ((docs.get(name) or {}).get("systems") or {}).values()
        )
        parts += [
            "Beyond the paper: a graph that is not Wikidata, resolved against a memory built from the graph's "
            "own RDF (`pgmr memory build --from-rdf`); not in the total above."
            + (" Rows kept from an earlier run (`--keep-from`) were timed in that run." if kept else ""),
            "",
            _overview_table([_overview_row(name, docs.get(name)) for name in beyond]),
            "",
        ]
    parts += [
        "## The paper's Table 1 (reference)",
        "",
        paper_table(),
        "",
        "Query EM, BLEU, URI EM and URI hallucination in percent, LC-QuAD 2.0 test; the paper reports no SQM.",
        "",
    ]
    for name, doc in paper.items():
        parts += _section(name, doc, prefix)
    margins = margins_table(docs)
    if margins:
        parts += [
            "## PGMR over direct: original vs unknown-URI split",
            "",
            margins,
            "",
            "Query EM in percent. Compare rows only when their training steps agree: the margin grows with the "
            "training budget, so the two splits are trained with the same recipe and number of steps. On the "
            "unknown-URI split a direct model cannot write a test entity's ID, having never seen it; PGMR "
            "resolves it from the memory.",
            "",
        ]
    parts += ["## Deviations from the paper", "", *deviations(docs), ""]
    for name in beyond:
        parts += _section(name, docs.get(name), prefix)
    return "\n".join(parts)


def _overview_row(name: str, doc: Mapping[str, Any] | None) -> list[Any]:
    summary = EXPERIMENTS[name].summary
    if doc is None:
        return [name, "not run", "-", "-", summary]
    limit = doc.get("settings", {}).get("limit")
    kept = [
        f"{system} kept from {entry['carried_from'].get('started_at')}"
        for system, entry in (doc.get("systems") or {}).items()
        if entry.get("carried_from")
    ]
    return [
        name,
        ("quick run (--limit " + str(limit) + ")" if limit else "full run") + "".join(f"; {k}" for k in kept),
        doc.get("started_at", "?"),
        fmt_seconds(doc.get("wall_seconds")),
        summary,
    ]


def _overview_table(rows: list[list[Any]]) -> str:
    return md_table(["experiment", "status", "run at", "wall time", "what"], rows, left=(0, 1, 2, 4))


def _section(name: str, doc: Mapping[str, Any] | None, prefix: str) -> list[str]:
    """An experiment's section: its command, wall time and models, its tables and plots."""
    module = experiment_module(name)
    parts = [f"## {module.TITLE} (`{name}`)", ""]
    if doc is None:
        return [*parts, f"Not run: no `{name}/{METRICS_FILE}` yet (`pgmr experiment {name}`).", ""]
    limit = doc.get("settings", {}).get("limit")
    parts += [
        f"Command: `{doc.get('command') or '(not recorded)'}`; run {doc.get('started_at', '?')}; wall time "
        f"{fmt_seconds(doc.get('wall_seconds'))}"
        + (f"; **quick run on the first {limit} questions**" if limit else "")
        + ".",
        "",
        *([line, ""] if (line := models_line(doc)) else []),
        module.tables(doc),
        "",
    ]
    for plot in doc.get("plots", []):
        parts += [f"![{name}]({prefix}/{name}/{plot})", ""]
    return parts


def write_results_doc(published_dir: Path, out: Path) -> dict[str, dict[str, Any] | None]:
    """Writes `out` from the metrics under `published_dir`; returns those metrics (None: not run)."""
    from pgmr.jsonl import atomic_write_text

    docs = load_metrics(published_dir)
    atomic_write_text(
        out, results_document(published_dir, plots_prefix=_relative(published_dir, out.parent), docs=docs)
    )
    return docs


def _relative(path: Path, start: Path) -> str:
    import os

    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()
