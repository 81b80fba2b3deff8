"""lcquad2-unknown-uri: LC-QuAD 2.0 re-split so that no test entity occurs in training
(`pgmr.conversion.unknown_uri`); pgmr and direct (and rag when asked) trained on its training part with the same
preset and budget, then evaluated on its test part.

Run directories (`<out>/runs/<mode>/`) are resumable: calling the experiment again continues training from
the last checkpoint (raise --max-steps/--epochs, or give another --max-minutes), `--no-train` only evaluates.
The resolver's prominence prior is counted from the split's training part only (without its validation carve,
where the ensemble's reranker is fitted): the memory's own prior comes from LC-QuAD train, which holds many of
this split's test questions. For the same reason the role facts that
orient triples (pgmr.resolver.facts) come from the generators' training part of this split, not the shipped
ones; they are written to `<out>/split/facts.json`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from pgmr.experiments.common import (
    SYSTEMS_NOTE,
    ExperimentError,
    Workspace,
    carry_over,
    earlier_run,
    fmt_seconds,
    md_table,
    metrics_document,
    num,
    pct,
    report_header,
    run_system,
    system_notes,
    systems_table,
    write_experiment,
)
from pgmr.experiments.unknown_uri_split import (
    NAME,
    UnknownUriOptions,
    qa_record,
    split_prior_and_facts,
    unknown_uri_split,
)
from pgmr.experiments.unknown_uri_systems import ENSEMBLE, ensemble_spec, mode_spec, train_mode

TITLE = "LC-QuAD 2.0, unknown-URI split: no test entity occurs in training"


def run(ws: Workspace, options: UnknownUriOptions) -> dict[str, Any]:
    from pgmr.datasets.splits import split_train_validation
    from pgmr.jsonl import write_json, write_jsonl

    split, train_info, test_info = unknown_uri_split(ws, options)
    split_dir = ws.out_dir / "split"
    write_json(split_dir / "split.json", {**split.stats, "test_ids": split.test_ids()})
    write_jsonl(split_dir / "test.jsonl", [r.to_json() for r in split.test])
    ws.reporter.note(f"unknown-URI split: {len(split.train)} training and {len(split.test)} test records")

    test_records = [qa_record(r) for r in split.test]
    if ws.settings.limit:
        test_records = test_records[: ws.settings.limit]
    if not test_records:
        raise ExperimentError("the unknown-URI split has no test records")
    earlier = earlier_run(ws, NAME, same={"questions": len(test_records)})
    if earlier is not None and earlier.get("split") != json.loads(json.dumps(dict(split.stats))):
        raise ExperimentError(
            f"--keep-from: the earlier run ({earlier.get('started_at')}) built another split (other --seed, "
            "--test-share or --test-size, or other data); its rows would not be comparable"
        )
    pool = list(split.train[: options.train_limit] if options.train_limit else split.train)
    train_part, validation_part = split_train_validation(pool, options.validation_share)
    if options.train and (not train_part or not validation_part):
        raise ExperimentError(
            f"{len(pool)} training records leave {len(train_part)} for training and {len(validation_part)} "
            "for validation; use more data (--train-limit) or another --validation-share"
        )

    # From this split's training part only (see the module docstring); what every resolver here uses. Not the
    # validation carve either, as the shipped memory's prior since 2026-12-05: the reranker is fitted there, and
    # a prior that counted those queries makes every gold ID of them look prominent.
    prior_records = train_part
    prior, facts = split_prior_and_facts(train_part, options.seed)
    write_json(split_dir / "facts.json", facts.to_json())
    training: dict[str, Any] = {}
    systems: dict[str, Any] = {}
    resolver = None
    for mode in options.modes:
        run_dir = ws.out_dir / "runs" / mode
        if options.train:
            training[mode] = train_mode(ws, mode, run_dir, train_part, validation_part, options)
        spec = mode_spec(mode, run_dir, ws.settings.command)
        if mode in ("pgmr", "rag-pgmr") and resolver is None and not spec.missing:
            resolver = ws.resolver(prior=prior, facts=facts)
        systems[mode] = run_system(
            ws,
            spec,
            test_records,
            experiment=NAME,
            dataset="unknown-URI test",
            resolver=resolver,
            catalog=ws.catalog,
        )
    rerank: dict[str, Any] | None = None
    if options.structured is not None:
        spec, rerank = ensemble_spec(ws, options, prior, facts, validation_part)
        systems[ENSEMBLE] = run_system(
            ws,
            spec,
            test_records,
            experiment=NAME,
            dataset="unknown-URI test",
            resolver=resolver if resolver is not None else ws.resolver(prior=prior, facts=facts),
            catalog=ws.catalog,
        )
    kept = carry_over(systems, earlier, add_missing=True, reporter=ws.reporter)
    earlier_training = (earlier or {}).get("training") or {}
    for mode, entry in kept.items():
        # A kept row's training record comes with it (steps and time for the comparison table).
        if entry.get("carried_from") and mode not in training and mode in earlier_training:
            training[mode] = earlier_training[mode]
    systems = kept
    doc = metrics_document(
        ws,
        NAME,
        TITLE,
        settings={
            "options": {
                **asdict(options),
                "structured": options.structured and str(options.structured),
                "extra_members": [[n, str(p)] for n, p in options.extra_members],
                "verifier": options.verifier and str(options.verifier),
            },
            "questions": len(test_records),
        },
        conversion={"lcquad2-train": train_info, "lcquad2-test": test_info},
        split=dict(split.stats),
        training_data={
            "train_examples": len(train_part),
            "validation_examples": len(validation_part),
            "prior_queries": len(prior_records),
        },
        training=training,
        systems=systems,
    )
    if rerank is None and earlier is not None and ENSEMBLE in kept and kept[ENSEMBLE].get("carried_from"):
        rerank = earlier.get("rerank")
    if rerank is not None:
        doc["rerank"] = rerank
    from pgmr.experiments.plots import systems_bar_plot

    path = systems_bar_plot(
        systems, ws.out_dir / f"{NAME}.png", title=TITLE, paper=False, reporter=ws.reporter
    )
    doc["plots"] = [path.name] if path else []
    write_experiment(ws, doc, report(doc))
    return doc


def tables(doc: Mapping[str, Any]) -> str:
    split = doc.get("split", {})
    split_rows = [
        ["pooled records (LC-QuAD 2.0 train + test, converted)", split.get("pooled_records")],
        ["records with at least one entity", split.get("records_with_entities")],
        ["components (records linked by shared entities)", split.get("components")],
        ["largest components", ", ".join(str(s) for s in split.get("largest_components", []))],
        ["test records (target)", f"{split.get('test_records')} ({split.get('target_test_size')})"],
        ["training records", split.get("train_records")],
        [
            "test entity IDs / of them in training",
            f"{split.get('test_entity_ids')} / {split.get('test_entity_ids_in_train')}",
        ],
        [
            "test records with a relation unseen in training",
            split.get("test_records_with_a_relation_unseen_in_train"),
        ],
    ]
    parts = ["Split:", "", md_table(["", "value"], split_rows), ""]
    training = doc.get("training", {})
    if training:
        rows = [
            [
                mode,
                t.get("global_step"),
                fmt_seconds(t.get("wall_seconds")),
                "yes" if t.get("stopped_by_budget") else "no",
                t.get("resumed_from") or "-",
                num(t.get("validation", {}).get("exact_match"), 3),
            ]
            for mode, t in training.items()
        ]
        parts += [
            "Training (this call):",
            "",
            md_table(["mode", "steps", "wall", "budget stop", "resumed from", "validation EM"], rows),
            "",
        ]
    rerank = doc.get("rerank")
    if rerank:
        part = rerank.get("rest", {})
        rows = [[name, pct(value)] for name, value in part.items()]
        parts += [
            f"The {ENSEMBLE} reranker, fitted on the split's {rerank.get('validation_questions')} validation "
            "questions (Query EM there; the reranked figure by two-fold cross-validation: fitted on one half, "
            "scored on the other):"
            if rerank.get("fitted", True)
            else f"The {ENSEMBLE} reranker: no validation question where one draft is right and the other "
            "wrong, so its weights are neutral.",
            "",
            *([md_table(["drafts", "validation Query EM"], rows), ""] if rows else []),
        ]
    parts += [
        "Test:",
        "",
        systems_table(doc.get("systems", {}), paper=False),
        "",
        *([system_notes(doc.get("systems", {})), ""] if system_notes(doc.get("systems", {})) else []),
        SYSTEMS_NOTE,
        "The paper's numbers for this setting are not transcribed here.",
    ]
    return "\n".join(parts)


def report(doc: Mapping[str, Any]) -> str:
    parts = report_header(doc)
    parts += [
        "Entities are grouped by shared use (union-find over entity IDs; relations excluded: their inventory is "
        "small and shared) and whole groups go to test, so no entity ID of a test question occurs in any "
        "training question. Frequent entities (Q5 and the like) bind most questions into one group, which "
        "stays in training: the test part leans towards rarer entities.",
        "",
        tables(doc),
        "",
    ]
    for plot in doc.get("plots", []):
        parts += [f"![{NAME}]({plot})", ""]
    parts += [
        "Split: `split/split.json` (statistics, test ids), `split/test.jsonl`; runs: `runs/<mode>/`.",
        "",
    ]
    return "\n".join(parts)
