"""distractors: the pgmr model's outputs resolved against memories grown around the gold entities.

Size m holds the gold entities of the evaluated questions plus m times as many other entities (drawn at
random, seeded, from the full memory); relations are all kept; `full` is the whole memory. Sub-memories are
built from the full memory's stored vectors, so nothing is re-encoded. The model's outputs are generated
once (or read from --predictions) and resolved against each memory, so only the memory changes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmr.experiments.common import (
    ExperimentError,
    Workspace,
    answer_outputs,
    gold_entities,
    md_table,
    metrics_document,
    num,
    parses,
    pct,
    pgmr_outputs,
    prediction_rows,
    report_header,
    score,
    sub_memory,
    write_experiment,
    write_system,
)

NAME = "distractors"
TITLE = "Distractor memory: PGMR resolution as the memory grows around the gold entities"
DATASET = "lcquad2-test"
DEFAULT_SIZES = "1,3,5,9,full"


def parse_sizes(text: str, allow_none: bool = False) -> list[int | None]:
    """ "1,3,5,9,full" -> [1, 3, 5, 9, None] (None: the whole memory); "" -> [] when `allow_none` (only
    --grown memories). Raises ExperimentError."""
    sizes: list[int | None] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part == "full":
            sizes.append(None)
            continue
        try:
            value = int(part)
        except ValueError:
            raise ExperimentError(f"--sizes: {part!r} is neither a whole number nor 'full'") from None
        if value < 0:
            raise ExperimentError(f"--sizes: {value} is negative")
        sizes.append(value)
    if not sizes and not allow_none:
        raise ExperimentError("--sizes names no size")
    if len(set(sizes)) != len(sizes):
        raise ExperimentError("--sizes names a size twice")
    return sizes


def run(
    ws: Workspace,
    *,
    sizes: Sequence[int | None],
    seed: int = 0,
    predictions: Path | None = None,
    grown: Sequence[Path] = (),
    grown_prior: str = "own",
) -> dict[str, Any]:
    """`grown`: memories built elsewhere (e.g. `pgmr memory build --from-dump` of a synthetic dump) to resolve
    the same outputs against after the sizes; each is labelled by its entity count. `grown_prior`: "own" (the
    grown memory's prior, e.g. sitelinks) or "shipped" (the experiment memory's prior instead: a synthetic
    dump's sitelink counts are drawn, and this separates what its distractors cost from what its prior does)."""
    if grown_prior not in ("own", "shipped"):
        raise ExperimentError(f"grown_prior must be 'own' or 'shipped', not {grown_prior!r}")
    records = ws.load_test(DATASET)
    if not records:
        raise ExperimentError(f"{DATASET} has no records")
    outputs, source = pgmr_outputs(ws, records, predictions)
    full = ws.memory
    in_memory = full.entities.ids()
    wanted = gold_entities(records)
    gold = sorted(wanted & in_memory)
    others = sorted(in_memory - set(gold))
    random.Random(seed).shuffle(others)
    results: list[dict[str, Any]] = []
    from pgmr.memory import Memory, PgmrMemoryError

    for size in [*sizes, *grown]:
        if isinstance(size, Path):
            try:
                memory = Memory.load(size, ws.memory.encoder, verify=False)
            except PgmrMemoryError as exc:
                raise ExperimentError(str(exc)) from None
            label = f"grown-{len(memory.entities) // 1000}k"
            if grown_prior == "shipped":
                memory = Memory(
                    memory.entities, memory.relations, memory.encoder, memory.manifest,
                    prior_counts=ws.memory.prior_counts, prior_source=ws.memory.prior_source,
                    lexical=memory.lexical,
                )  # fmt: skip
                label += "-shipped-prior"
            extra = len(memory.entities) - len(gold)
        elif size is None:
            label = "full"
            memory, extra = full, len(in_memory) - len(gold)
        else:
            label = f"{size}x"
            wanted_extra = size * len(gold)
            if wanted_extra > len(others):
                ws.reporter.warn(f"{label}: only {len(others)} other entities in the memory")
            chosen = others[:wanted_extra]
            memory, extra = sub_memory(full, set(gold) | set(chosen)), len(chosen)
        started = time.monotonic()
        # Grounding asks the memory in use which labels exist, as a deployed system with this memory would.
        answered = answer_outputs(
            ws.resolver(memory),
            ws.stages(),
            [r.question for r in records],
            outputs,
            label=f"resolving ({label})",
            reporter=ws.reporter,
        )
        seconds = round(time.monotonic() - started, 1)
        rows = prediction_rows(records, outputs, answered)
        evaluation = score(rows, records, catalog=None, label=f"scoring ({label})", reporter=ws.reporter)
        write_system(
            ws.out_dir / label,
            rows,
            evaluation,
            command=ws.settings.command,
            inputs={"experiment": NAME, "memory_size": label, "gold": DATASET},
            title=f"{NAME}: memory {label}",
        )
        results.append(
            {
                "size": str(size) if isinstance(size, Path) else size,
                "prior": memory.prior_source,
                "vectors": memory.manifest.vectors,
                "label": label,
                "entities_in_memory": len(memory.entities),
                "entity_rows": len(memory.entities.rows),
                "distractors": extra,
                "resolution_seconds": seconds,
                "overall": dict(evaluation.overall),
            }
        )
        ws.reporter.note(
            f"memory {label}: {len(memory.entities)} entities, Query EM {pct(evaluation.overall['query_em'])}"
        )
    doc = metrics_document(
        ws,
        NAME,
        TITLE,
        settings={
            "dataset": DATASET,
            "questions": len(records),
            "sizes": [r["label"] for r in results],
            "seed": seed,
        },
        source=source,
        gold_entities=len(gold),
        gold_entities_not_in_memory=len(wanted) - len(gold),
        parsed_outputs=sum(1 for output in outputs if parses(output)),
        results=results,
    )
    from pgmr.experiments.plots import distractor_plot

    path = distractor_plot(results, ws.out_dir / f"{NAME}.png", title=TITLE, reporter=ws.reporter)
    doc["plots"] = [path.name] if path else []
    write_experiment(ws, doc, report(doc))
    return doc


def tables(doc: Mapping[str, Any]) -> str:
    rows = [
        [
            r["label"],
            r["entities_in_memory"],
            r["entity_rows"],
            pct(r["overall"].get("query_em")),
            pct(r["overall"].get("sqm")),
            pct(r["overall"].get("uri_em")),
            num(r["overall"].get("bleu")),
            pct(r["overall"].get("refusal_rate")),
            pct(r["overall"].get("invalid_rate")),
        ]
        for r in doc.get("results", [])
    ]
    header = ["memory", "entities", "entity rows", "Query EM", "SQM", "URI EM", "BLEU", "refused", "invalid"]
    grown = [
        f"`{r['label']}`: prior {r.get('prior') or 'ID numbers'}; vectors {r.get('vectors', 'encoded')}"
        for r in doc.get("results", [])
        if str(r["label"]).startswith("grown")
    ]
    return "\n".join(
        [
            md_table(header, rows),
            *(["", "Grown memories (docs/scale.md): " + "; ".join(grown) + "."] if grown else []),
            "",
            f"{doc.get('gold_entities')} gold entities of {doc['settings']['questions']} questions "
            f"({doc.get('gold_entities_not_in_memory', 0)} not in the memory at all); "
            f"{doc.get('parsed_outputs')} model outputs parse. Rates in percent. The paper's distractor figures "
            "are not transcribed here.",
        ]
    )


def report(doc: Mapping[str, Any]) -> str:
    parts = report_header(doc)
    source = doc.get("source", {})
    origin = (
        f"read from `{source['predictions']}`"
        if "predictions" in source
        else f"generated once by `{source.get('model')}`"
    )
    parts += [
        f"Model outputs {origin} and resolved against each memory (relations: all kept).",
        "",
        tables(doc),
        "",
    ]
    for plot in doc.get("plots", []):
        parts += [f"![{NAME}]({plot})", ""]
    parts += ["Per size: `<size>/predictions.jsonl` (scored rows); raw outputs: `generated.jsonl`.", ""]
    return "\n".join(parts)
