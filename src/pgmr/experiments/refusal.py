"""refusal: does PGMR refuse the questions its memory cannot answer? An entity-threshold sweep over the pgmr
model's outputs for answerable and unanswerable questions.

The evaluated questions that mention an entity are shuffled (seeded) and halved; the gold entities of the
first half are removed from the memory (a sub-memory built from the full memory's stored vectors). A question
is answerable when every gold entity of it is still in that memory; questions of the second half that lost
an entity through one shared with the first half count as unanswerable too. The model's outputs are
generated once and resolved once without a threshold: a threshold only decides whether the resolved query is
returned or refused (the weakest entity placeholder's best similarity below it refuses), so the sweep needs
no further resolution. At the chosen --entity-threshold the outputs are also resolved for real, and that
resolution's refusals must be the ones the sweep predicts (recorded as `sweep_agrees`).

Refusal precision: refused questions that are unanswerable / refused; recall: refused unanswerable /
unanswerable; coverage: questions answered (resolved, not refused; unparsable outputs never are) / all;
accuracy: Query EM (and URI EM) of the answered ones.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmr.experiments.common import (
    ExperimentError,
    Workspace,
    base_rows,
    gold_entities,
    md_table,
    metrics_document,
    min_entity_similarity,
    parse_outputs,
    pct,
    pgmr_outputs,
    report_header,
    resolution_fields,
    resolve_parsed,
    score,
    sub_memory,
    write_experiment,
    write_system,
)

NAME = "refusal"
TITLE = "Refusal: entity-threshold sweep over answerable and unanswerable questions"
DATASET = "lcquad2-test"
THRESHOLDS: tuple[float, ...] = tuple(round(0.30 + 0.01 * i, 2) for i in range(71))
DEFAULT_THRESHOLD = 0.80
# The operating point asked of a threshold: most refusals right, most unanswerable questions refused, few
# answerable ones lost.
TARGET = {"refusal_precision": 0.9, "refusal_recall": 0.8, "answerable_refused": 0.1}


def sweep(
    similarities: Sequence[float | None],
    answerable: Sequence[bool],
    query_em: Sequence[bool],
    uri_em: Sequence[bool],
    thresholds: Sequence[float] = THRESHOLDS,
) -> list[dict[str, Any]]:
    """One point per threshold. `similarities[i]` is None for an output that does not parse (never
    answered, never a refusal)."""
    n = len(similarities)
    n_unanswerable = sum(not a for a in answerable)
    n_answerable = n - n_unanswerable
    curve = []
    for t in thresholds:
        refused = [s is not None and s < t for s in similarities]
        answered = [i for i, s in enumerate(similarities) if s is not None and s >= t]
        hits = sum(r and not a for r, a in zip(refused, answerable, strict=True))
        n_refused = sum(refused)
        curve.append(
            {
                "threshold": t,
                "refused": n_refused,
                "refusal_precision": hits / n_refused if n_refused else None,
                "refusal_recall": hits / n_unanswerable if n_unanswerable else None,
                "answerable_refused": (
                    sum(r and a for r, a in zip(refused, answerable, strict=True)) / n_answerable
                    if n_answerable
                    else None
                ),
                "coverage": len(answered) / n if n else 0.0,
                "answered_accuracy": sum(query_em[i] for i in answered) / len(answered) if answered else None,
                "answered_uri_em": sum(uri_em[i] for i in answered) / len(answered) if answered else None,
            }
        )
    return curve


def meets_target(point: Mapping[str, Any]) -> bool:
    p, r, lost = point["refusal_precision"], point["refusal_recall"], point["answerable_refused"]
    return (
        p is not None
        and r is not None
        and p >= TARGET["refusal_precision"]
        and r >= TARGET["refusal_recall"]
        and (lost or 0.0) <= TARGET["answerable_refused"]
    )


def run(
    ws: Workspace,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    seed: int = 0,
    predictions: Path | None = None,
    thresholds: Sequence[float] = THRESHOLDS,
) -> dict[str, Any]:
    from pgmr.resolver import Resolver, ResolverConfig

    records = [r for r in ws.load_test(DATASET) if gold_entities([r])]
    if len(records) < 2:
        raise ExperimentError("the refusal sweep needs at least two questions that mention an entity")
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    records = [records[i] for i in order]
    half = len(records) // 2
    removed = gold_entities(records[:half])
    full = ws.memory
    memory = sub_memory(full, full.entities.ids() - removed)
    kept = memory.entities.ids()
    answerable = [gold_entities([r]) <= kept for r in records]

    outputs, source = pgmr_outputs(ws, records, predictions)
    relation_threshold = ws.settings.relation_threshold
    # Never refusing on entities: every parsable output gets its resolution and its weakest entity similarity.
    open_resolver = Resolver(
        memory, ResolverConfig(entity_threshold=-1.0, relation_threshold=relation_threshold)
    )
    # Grounded against the reduced memory: the removed entities' labels must not steer the grounding either.
    parsed = parse_outputs(outputs, [r.question for r in records], known=open_resolver.knows)
    resolved = resolve_parsed(open_resolver, parsed, label="resolving (no threshold)")
    rows = base_rows(records, outputs)
    for row, result in zip(rows, resolved, strict=True):
        row.update(resolution_fields(result))
    evaluation = score(rows, records, catalog=None, label="scoring (no threshold)")
    query_em = [r.query_em for r in evaluation.records]
    uri_em = [r.uri_em for r in evaluation.records]
    # Refused already without an entity threshold: a relation threshold did it, at every entity threshold.
    similarities = [
        float("-inf") if row["status"] == "refused" else min_entity_similarity(r)
        for r, row in zip(resolved, rows, strict=True)
    ]
    grid = sorted({*thresholds, threshold})
    curve = sweep(similarities, answerable, query_em, uri_em, grid)
    meeting = [p for p in curve if meets_target(p)]
    best = max(meeting, key=lambda p: (p["refusal_recall"], -p["threshold"])) if meeting else None

    # The chosen threshold, resolved for real.
    chosen = Resolver(
        memory, ResolverConfig(entity_threshold=threshold, relation_threshold=relation_threshold)
    )
    at_threshold = resolve_parsed(chosen, parsed, label=f"resolving (threshold {threshold:g})")
    chosen_rows = base_rows(records, outputs)
    for row, result, ok in zip(chosen_rows, at_threshold, answerable, strict=True):
        row.update(resolution_fields(result))
        row["answerable"] = ok
    chosen_eval = score(chosen_rows, records, catalog=None, label=f"scoring (threshold {threshold:g})")
    write_system(
        ws.out_dir / f"threshold-{threshold:g}",
        chosen_rows,
        chosen_eval,
        command=ws.settings.command,
        inputs={"experiment": NAME, "entity_threshold": threshold, "gold": DATASET},
        title=f"{NAME}: entity threshold {threshold:g}",
    )
    point = next(p for p in curve if p["threshold"] == threshold)
    refused_for_real = sum(1 for row in chosen_rows if row["status"] == "refused")
    doc = metrics_document(
        ws,
        NAME,
        TITLE,
        settings={
            "dataset": DATASET,
            "questions": len(records),
            "seed": seed,
            "entity_threshold": threshold,
            "thresholds": [grid[0], grid[-1], len(grid)],
        },
        source=source,
        sample={
            "questions": len(records),
            "answerable": sum(answerable),
            "unanswerable": len(records) - sum(answerable),
            "removed_entities": len(removed),
            "entities_in_memory": len(memory.entities),
            "unparsable_outputs": sum(1 for s in similarities if s is None),
        },
        chosen={
            **point,
            "refused_by_resolver": refused_for_real,
            "sweep_agrees": refused_for_real == point["refused"],
            "overall": dict(chosen_eval.overall),
        },
        thresholds_meeting_target=[p["threshold"] for p in meeting],
        target=TARGET,
        best=best,
        curve=curve,
    )
    from pgmr.experiments.plots import refusal_plot

    path = refusal_plot(curve, ws.out_dir / f"{NAME}.png", title=TITLE, chosen=threshold)
    doc["plots"] = [path.name] if path else []
    write_experiment(ws, doc, report(doc))
    return doc


def _point_row(p: Mapping[str, Any]) -> list[str]:
    return [
        f"{p['threshold']:.2f}",
        pct(p["refusal_precision"], 1),
        pct(p["refusal_recall"], 1),
        pct(p["answerable_refused"], 1),
        pct(p["coverage"], 1),
        pct(p["answered_accuracy"], 1),
        pct(p["answered_uri_em"], 1),
    ]


def tables(doc: Mapping[str, Any]) -> str:
    chosen = doc.get("chosen", {}).get("threshold")
    shown = [
        p for p in doc.get("curve", []) if round(p["threshold"] * 100) % 5 == 0 or p["threshold"] == chosen
    ]
    header = [
        "threshold",
        "refusal precision",
        "refusal recall",
        "answerable refused",
        "coverage",
        "Query EM of answered",
        "URI EM of answered",
    ]
    sample = doc.get("sample", {})
    best = doc.get("best")
    lines = [
        md_table(header, [_point_row(p) for p in shown]),
        "",
        f"{sample.get('questions')} questions: {sample.get('answerable')} answerable, "
        f"{sample.get('unanswerable')} unanswerable ({sample.get('removed_entities')} gold entities removed from "
        f"the memory); {sample.get('unparsable_outputs')} model outputs do not parse. Percent.",
        "",
        "Thresholds meeting precision >= 90%, recall >= 80%, answerable refused <= 10%: "
        + (", ".join(f"{t:.2f}" for t in doc.get("thresholds_meeting_target", [])) or "none")
        + (f" (best recall at {best['threshold']:.2f})" if best else "")
        + ". The paper's refusal figures are not transcribed here.",
    ]
    return "\n".join(lines)


def report(doc: Mapping[str, Any]) -> str:
    chosen = doc.get("chosen", {})
    parts = report_header(doc)
    parts += [
        tables(doc),
        "",
        f"At the chosen threshold {chosen.get('threshold')}: the resolver refused {chosen.get('refused_by_resolver')} "
        f"questions; the sweep agrees: {'yes' if chosen.get('sweep_agrees') else 'NO'}. Scored rows (with "
        f"`answerable`): `threshold-{chosen.get('threshold'):g}/predictions.jsonl`.",
        "",
    ]
    for plot in doc.get("plots", []):
        parts += [f"![{NAME}]({plot})", ""]
    return "\n".join(parts)
