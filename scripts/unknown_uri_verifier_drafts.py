"""The draft verifier's training rows on the unknown-URI split (issue #18): what `pgmr ensemble verifier-drafts`
writes for the shipped default, built from the split's own ensemble and training part.

    python scripts/unknown_uri_verifier_drafts.py runs/unknown-uri/experiment/runs/pgmr-ensemble \\
        -o runs/unknown-uri/verifier-rows.jsonl                                   # ~25 min on 2 CPU cores
    pgmr train-verifier runs/unknown-uri/verifier-rows.jsonl -o runs/unknown-uri/verifier   # ~1 h
    pgmr experiment lcquad2-unknown-uri ... --verifier runs/unknown-uri/verifier   # scripts/unknown_uri_ensemble.sh

The split and the validation carve are built as `pgmr experiment lcquad2-unknown-uri` builds them; the rows
cover the training part only (the reranker is fitted on the validation carve, the test part is never seen).
Per question: each member's draft and each structured member's `+t2` and `+r2` runners-up
(pgmr.experiments.runners_up), resolved as the experiment resolves them (the split's own prior and role facts,
the shipped grounding, no refusal), with the gold query. `pgmr train-verifier` reads them
(pgmr.experiments.verifier_fit).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "ensemble", type=Path, help="the split's ensemble (OUT/experiment/runs/pgmr-ensemble)"
    )
    parser.add_argument("-o", "--out", type=Path, required=True, help="output JSONL")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, help="only the first N training questions (quick runs)")
    args = parser.parse_args()

    from pgmr.cli.experiment_options import RichReporter
    from pgmr.config import resolve_data_dir
    from pgmr.datasets.splits import split_train_validation
    from pgmr.experiments.predict import generate_draft_lists
    from pgmr.experiments.runners_up import runner_up_drafts
    from pgmr.experiments.settings import ExperimentSettings
    from pgmr.experiments.systems import load_model
    from pgmr.experiments.unknown_uri_split import (
        UnknownUriOptions,
        split_prior_and_facts,
        unknown_uri_split,
    )
    from pgmr.experiments.verifier_fit import resolved_sparql
    from pgmr.experiments.workspace import Workspace
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card
    from pgmr.jsonl import atomic_write_text

    try:
        card = read_model_card(args.ensemble)
    except ModelCardError as exc:
        print(f"{args.ensemble}: {exc}", file=sys.stderr)
        return 2
    if card.get("backend") != "ensemble":
        print(f"{args.ensemble}: a {card.get('backend')!r} model, not an ensemble", file=sys.stderr)
        return 2
    structured = {}
    for member in card.get("members", []):
        path = (args.ensemble / member["path"]).resolve()
        try:
            backend = read_model_card(path).get("backend")
        except ModelCardError as exc:
            print(f"{args.ensemble}: member {member.get('name')!r}: {exc}", file=sys.stderr)
            return 2
        if backend == "structured":
            structured[member["name"]] = path

    options = UnknownUriOptions()
    settings = ExperimentSettings(
        data_dir=resolve_data_dir(args.data_dir), out_dir=args.out.parent, batch_size=args.batch_size
    )
    ws = Workspace(settings, RichReporter())
    split, _, _ = unknown_uri_split(ws, options)
    train_part, _ = split_train_validation(list(split.train), options.validation_share)
    prior, facts = split_prior_and_facts(train_part, options.seed)
    records = train_part[: args.limit] if args.limit else train_part
    questions = [r.question for r in records]

    started = time.monotonic()
    drafts = generate_draft_lists(
        load_model(args.ensemble, settings),
        questions,
        batch_size=args.batch_size,
        label=f"drafts for {len(questions)} training questions",
        reporter=ws.reporter,
    )
    rows = [
        {
            "id": r.id,
            "question": r.question,
            "gold": r.sparql,
            "drafts": [{"source": d.source, "text": d.text, "confidence": dict(d.confidence)} for d in ds],
        }
        for r, ds in zip(records, drafts, strict=True)
    ]
    print(f"members' drafts in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    extra, differ = runner_up_drafts(rows, structured, batch_size=args.batch_size)
    print(f"runners-up in {time.monotonic() - started:.0f} s; top frames differing: {dict(differ)}")
    for row in rows:
        row["drafts"].extend(extra[str(row["id"])])

    no_refusal = {"min_confidence": 0.0, "entity_threshold": 0.0, "relation_threshold": 0.0}
    resolver = ws.resolver(prior=prior, facts=facts, **no_refusal)
    started = time.monotonic()
    pairs = [(r["question"], d["text"]) for r in rows for d in r["drafts"]]
    with ws.reporter.progress("resolving the distinct drafts", len(set(pairs))) as advance:
        sparql = resolved_sparql(pairs, resolver, ws.stages(**no_refusal).grounding, advance=advance)
    print(f"resolved {len(sparql)} distinct drafts in {time.monotonic() - started:.0f} s")
    lines = []
    for row in rows:
        for d in row["drafts"]:
            d["sparql"] = sparql[(row["question"], d["text"])]
        lines.append(json.dumps(row) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, "".join(lines))
    print(f"wrote {args.out}: {len(rows)} questions; next: pgmr train-verifier {args.out} -o RUN")
    return 0


if __name__ == "__main__":
    sys.exit(main())
