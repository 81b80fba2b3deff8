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
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.experiments.common import (
    SYSTEMS_NOTE,
    ExperimentError,
    SystemSpec,
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

if TYPE_CHECKING:
    pass
from pgmr.generators.base import RAG_MODES

NAME = "lcquad2-unknown-uri"
ENSEMBLE = "pgmr-ensemble"  # the row of the default's recipe (seq2seq + structured [+ more], reranked)
TITLE = "LC-QuAD 2.0, unknown-URI split: no test entity occurs in training"
MODES_DEFAULT: tuple[str, ...] = ("pgmr", "direct")


@dataclass(frozen=True)
class UnknownUriOptions:
    """The split and the training recipe (one for every mode; the defaults are the lead's minilm runs)."""

    modes: tuple[str, ...] = MODES_DEFAULT
    test_share: float = 0.1
    test_size: int | None = None
    seed: int = 0
    train: bool = True
    train_limit: int | None = None  # first N records of the split's training part (quick runs)
    validation_share: float = 0.08
    max_description_words: int | None = 0
    preset: str = "minilm"
    vocab_size: int = 8000
    max_source_len: int = 64
    max_target_len: int = 160
    batch_size: int = 32
    learning_rate: float = 1e-3
    encoder_learning_rate: float | None = 1e-4
    warmup_steps: int = 300
    epochs: float = 5.0
    max_steps: int | None = None
    max_minutes: float | None = 60.0
    eval_steps: int = 400
    max_eval_examples: int = 300
    k_entities: int = 5
    k_relations: int = 5
    candidate_description_words: int | None = 8
    # RAG inputs carry the candidate block beside the question: at 64 tokens it would be cut to a few lines.
    rag_max_source_len: int = 256
    # Each training record's paraphrased question as a second example (pgmr.generators.examples.with_paraphrases)
    paraphrases: bool = False
    train_seed: int = 42
    bf16: bool = False
    anneal_to_budget: bool = False
    # A structured model trained on this split's training part (scripts/train_unknown_uri_structured.py): with
    # it, the row `pgmr-ensemble` is the shipped default's recipe on this split (the pgmr run's seq2seq model and
    # this model, a reranker fitted on the split's validation part).
    structured: Path | None = None
    # Further members of that ensemble, after the two (name, model dir), each trained on this split's training
    # part (e.g. scripts/train_unknown_uri_seq2seq.py), as the shipped default's members beyond the two are.
    extra_members: tuple[tuple[str, Path], ...] = ()
    # The ensemble's draft verifier, trained on drafts of this split's training part
    # (scripts/unknown_uri_verifier_drafts.py, then `pgmr train-verifier`): its run or model directory, copied
    # into the ensemble as the shipped default's `verifier/`. None: the ensemble has none.
    verifier: Path | None = None

    def __post_init__(self) -> None:
        if not self.modes:
            raise ValueError("at least one mode to train")
        unknown = [m for m in self.modes if m not in ("pgmr", "direct", "rag", "rag-pgmr")]
        if unknown:
            raise ValueError(f"unknown modes {unknown}")
        if not 0.0 < self.validation_share < 1.0:
            raise ValueError("validation_share must be in (0, 1)")
        names = [name for name, _ in self.extra_members]
        if self.extra_members and self.structured is None:
            raise ValueError("further ensemble members need the structured one (--structured) too")
        if self.verifier is not None and self.structured is None:
            raise ValueError(
                "the ensemble's verifier (--verifier) needs its structured member (--structured)"
            )
        taken = [n for n in names if n in ("seq2seq", "structured") or names.count(n) > 1 or not n.strip()]
        if taken:
            raise ValueError(
                f"member names must differ from each other and from seq2seq, structured: {taken}"
            )


def _convert(ws: Workspace, name: str) -> tuple[list[Any], dict[str, Any]]:
    from pgmr.conversion import ConversionSummary, convert_records
    from pgmr.datasets import DatasetError, load_named

    try:
        records = load_named(name, ws.settings.data_dir).records
    except DatasetError as exc:
        raise ExperimentError(str(exc)) from None
    summary = ConversionSummary()
    converted = []
    with ws.reporter.progress(f"converting {name}", len(records)) as advance:
        done = 0
        for record in convert_records(records, ws.catalog, summary):
            converted.append(record)
            if summary.records_in - done >= 500:
                advance(summary.records_in - done)
                done = summary.records_in
        advance(len(records) - done)
    info = summary.to_json()
    return converted, {k: info[k] for k in ("records_in", "converted", "skipped_total")}


def _qa(record: Any) -> Any:
    from pgmr.datasets import QARecord

    return QARecord(record.id, record.question, record.sparql, record.source, meta=record.meta)


def unknown_uri_split(
    ws: Workspace, options: UnknownUriOptions
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The split (`pgmr.conversion.unknown_uri.build_split` over converted LC-QuAD 2.0 train and test, as
    `options` sets it) and the two conversion summaries; what `run` and scripts that train on the split share."""
    from pgmr.conversion.unknown_uri import build_split

    train_conv, train_info = _convert(ws, "lcquad2-train")
    test_conv, test_info = _convert(ws, "lcquad2-test")
    with ws.reporter.status("building the unknown-URI split"):
        try:
            split = build_split(
                train_conv,
                test_conv,
                test_size=options.test_size,
                test_share=options.test_share,
                seed=options.seed,
            )
        except ValueError as exc:
            raise ExperimentError(f"cannot build the unknown-URI split: {exc}") from None
    return split, train_info, test_info


def split_prior_and_facts(train_part: Sequence[Any], seed: int) -> tuple[Any, Any]:
    """The resolver's prominence prior and role facts of the split, from its training part only (the module
    docstring says why); what `run` and scripts that resolve drafts of the split share."""
    from pgmr.resolver import Prior
    from pgmr.resolver.facts import TrainingFacts
    from pgmr.resolver.priors import counts_from_sparql

    prior = Prior(counts_from_sparql([r.sparql for r in train_part]))
    facts = TrainingFacts.from_sparql(
        (r.sparql for r in train_part), {"dataset": f"{NAME} split (seed {seed}), training part"}
    )
    return prior, facts


def run(ws: Workspace, options: UnknownUriOptions) -> dict[str, Any]:
    from pgmr.datasets.splits import split_train_validation
    from pgmr.jsonl import write_json, write_jsonl

    split, train_info, test_info = unknown_uri_split(ws, options)
    split_dir = ws.out_dir / "split"
    write_json(split_dir / "split.json", {**split.stats, "test_ids": split.test_ids()})
    write_jsonl(split_dir / "test.jsonl", [r.to_json() for r in split.test])
    ws.reporter.note(f"unknown-URI split: {len(split.train)} training and {len(split.test)} test records")

    test_records = [_qa(r) for r in split.test]
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
    # validation carve either, as the shipped memory's prior since session 25: the reranker is fitted there, and
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
        spec = _spec(mode, run_dir, ws.settings.command)
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
        spec, rerank = _ensemble(ws, options, prior, facts, validation_part)
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


def _spec(mode: str, run_dir: Path, command: str) -> SystemSpec:
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir

    make = f"{command or 'pgmr experiment ' + NAME} (without --no-train)"
    try:
        model_dir = resolve_model_dir(run_dir)
        card = read_model_card(model_dir)
    except ModelCardError:
        return SystemSpec(mode, mode, run_dir, None, make_command=make)
    return SystemSpec(mode, mode, run_dir, model_dir, card, explicit=True, make_command=make)


def _ensemble(
    ws: Workspace, options: UnknownUriOptions, prior: Any, facts: Any, validation_part: Sequence[Any]
) -> tuple[SystemSpec, dict[str, Any] | None]:
    """The ensemble `<out>/runs/pgmr-ensemble`: a card naming the pgmr run's seq2seq model,
    `options.structured` and `options.extra_members`, and a reranker fitted on the split's validation part
    (refitted whenever a member's card changes; kept otherwise). Returns its spec (missing while the pgmr run
    has no model) and the fit's figures."""
    import hashlib

    from pgmr.experiments.rerank_fit import NothingToFit, draft_outcomes, report
    from pgmr.generators.ensemble import RERANKER_FILE, read_reranker
    from pgmr.generators.seq2seq.card import MODEL_CARD, ModelCardError, read_model_card, resolve_model_dir
    from pgmr.jsonl import atomic_write_text
    from pgmr.pipeline.rerank import FEATURES, Reranker

    directory = ws.out_dir / "runs" / ENSEMBLE
    seq2seq = _spec("pgmr", ws.out_dir / "runs" / "pgmr", ws.settings.command)
    if seq2seq.missing:
        make = f"{seq2seq.how_to_make}, with pgmr among --modes: the ensemble's seq2seq member"
        return SystemSpec(ENSEMBLE, "pgmr", directory, None, make_command=make), None
    assert options.structured is not None and seq2seq.model_dir is not None
    members = [("seq2seq", seq2seq.model_dir)]
    for flag, name, given in (
        ("--structured", "structured", options.structured),
        *(("--member", name, path) for name, path in options.extra_members),
    ):
        try:
            member_dir = resolve_model_dir(given)
            member_card = read_model_card(member_dir)
        except ModelCardError as exc:
            raise ExperimentError(f"{flag} {given}: {exc}") from None
        backend = member_card.get("backend", "seq2seq")
        if flag == "--structured" and backend != "structured":
            raise ExperimentError(
                f"--structured {member_dir}: a {backend!r} model; pass a structured model "
                "(scripts/train_unknown_uri_structured.py trains one on this split)"
            )
        mode = member_card.get("mode", "pgmr")
        if backend == "ensemble" or mode != "pgmr":
            raise ExperimentError(
                f"{flag} {member_dir}: members are pgmr-mode models; this is a {backend} model of mode {mode!r}"
            )
        trained_on = " ".join(member_card.get("run", {}).get("data", {}).get("datasets", []))
        trained_on = trained_on or " ".join(member_card.get("data", {}).get("datasets", []))
        if f"{NAME} split (seed {options.seed})" not in trained_on:
            ws.reporter.warn(
                f"{flag} {member_dir} was not trained on this split ({trained_on or 'no data recorded'}): "
                "its row is not the default's recipe on unseen entities"
            )
        members.append((name, member_dir))
    fingerprint = hashlib.sha256()
    for name, path in members:
        fingerprint.update(name.encode() + (path / MODEL_CARD).read_bytes())
    fingerprint.update(json.dumps(sorted(r.id for r in validation_part)).encode())
    # The signals it was fitted on come through the resolver: another prior or other facts, another fit.
    fingerprint.update(json.dumps(sorted(prior.counts.items())).encode())
    fingerprint.update(json.dumps(facts.to_json(), sort_keys=True).encode())
    # Drafts decoded otherwise are other drafts: the reranker is fitted again.
    settings = ws.settings
    decoding = [
        settings.num_beams,
        settings.max_new_tokens,
        settings.copy_bias,
        settings.relation_copy_bias,
        settings.precision,
        settings.device,
    ]
    fingerprint.update(json.dumps(decoding).encode())
    # The verifier's score is a signal of the fit: another verifier (or none), another fit.
    verifier_digest = _place_verifier(options.verifier, directory)
    if verifier_digest is not None:
        fingerprint.update(b"verifier" + verifier_digest)
    card = {
        "backend": "ensemble",
        "mode": "pgmr",
        "members": [
            {"name": n, "path": os.path.relpath(p.resolve(), directory.resolve())} for n, p in members
        ],
        "description": f"The default's recipe on the {NAME} split: every member trained on its training "
        "part, the reranker fitted on its validation part (pgmr experiment lcquad2-unknown-uri --structured "
        "[--member NAME=DIR ...]).",
    }
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / MODEL_CARD, json.dumps(card, indent=1) + "\n")
    try:
        earlier = read_reranker(directory)
    except ModelCardError:
        earlier = None  # unreadable: fitted again below
    if earlier and earlier.get("provenance", {}).get("fingerprint") == fingerprint.hexdigest():
        ws.reporter.note(f"{ENSEMBLE}: the reranker in {directory} was fitted on these members; kept")
        spec = SystemSpec(ENSEMBLE, "pgmr", directory, directory, read_model_card(directory), explicit=True)
        return spec, earlier["provenance"].get("fit")

    from pgmr.experiments.predict import generate_draft_lists
    from pgmr.experiments.systems import load_model

    generator = load_model(directory, settings)
    questions = [r.question for r in validation_part]
    drafts = generate_draft_lists(
        generator,
        questions,
        batch_size=settings.batch_size,
        label=f"{ENSEMBLE}: drafts for the split's {len(questions)} validation questions",
        reporter=ws.reporter,
    )
    # Without refusal: the reranker learns which draft is right, whatever the threshold (as scripts/fit_rerank.py).
    no_refusal: dict[str, Any] = {"min_confidence": 0.0, "entity_threshold": 0.0, "relation_threshold": 0.0}
    with ws.reporter.status(f"{ENSEMBLE}: resolving and scoring every validation draft"):
        outcomes = draft_outcomes(
            [r.id for r in validation_part],
            questions,
            drafts,
            {r.id: _qa(r) for r in validation_part},
            ws.resolver(prior=prior, facts=facts, **no_refusal),
            ws.stages(**no_refusal),
            verifier=getattr(generator, "verifier", None),
        )
    names = [n for n, _ in members]
    try:
        fit = report(outcomes, names)
        weights = fit.pop("reranker")
    except NothingToFit:
        # No validation question where one draft is right and the other wrong: nothing tells the members
        # apart, so no member is preferred (ties go to the first draft that resolves).
        ws.reporter.warn(f"{ENSEMBLE}: no validation question tells the drafts apart; neutral reranker")
        fit = {"questions": {"rest": len(outcomes)}, "fitted": False}
        weights = {n: {"bias": 0.0, **dict.fromkeys(FEATURES, 0.0)} for n in names}
    fit["validation_questions"] = len(outcomes)
    reranker = Reranker(
        weights,
        {
            "fitted_on": f"the {NAME} split's validation part ({len(outcomes)} questions, seed {options.seed})",
            "fingerprint": fingerprint.hexdigest(),
            "fit": fit,
            "command": settings.command,
        },
    )
    atomic_write_text(directory / RERANKER_FILE, json.dumps(reranker.to_json(), indent=1) + "\n")
    return SystemSpec(ENSEMBLE, "pgmr", directory, directory, read_model_card(directory), explicit=True), fit


def _place_verifier(given: Path | None, directory: Path) -> bytes | None:
    """`given` (a `pgmr train-verifier` run or model directory) copied to `directory`/verifier, where the
    ensemble loads it, replacing what was there; without one, a verifier left there by an earlier call is
    removed, so the row is what the options say. Returns the placed verifier's digest (None: none)."""
    import shutil

    from pgmr.fsutil import replace_dir, temp_sibling
    from pgmr.generators.verifier import VERIFIER_DIR, Verifier, VerifierError

    target = directory / VERIFIER_DIR
    if given is None:
        if target.exists():
            aside = temp_sibling(target)
            os.rename(target, aside)
            shutil.rmtree(aside, ignore_errors=True)
        return None
    source = given / "model" if (given / "model").is_dir() else given
    try:
        Verifier.load(source)
    except VerifierError as exc:
        raise ExperimentError(f"--verifier {given}: {exc} (pgmr train-verifier writes one)") from None
    digest = _files_digest(source)
    if target.is_dir() and _files_digest(target) == digest:
        return digest
    directory.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(target)
    shutil.copytree(source, tmp)
    replace_dir(tmp, target)
    return digest


def _files_digest(directory: Path) -> bytes:
    """SHA-256 over the names and contents of the files of `directory`, in name order."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.digest()


def train_mode(
    ws: Workspace,
    mode: str,
    run_dir: Path,
    train_part: Sequence[Any],
    validation_part: Sequence[Any],
    options: UnknownUriOptions,
) -> dict[str, Any]:
    """Train (or resume) `mode`'s model into `run_dir` with the experiment's recipe (`options`); what the run
    records of the training. scripts/train_unknown_uri_seq2seq.py trains further ensemble members with it."""
    from pgmr.config import default_memory_dir
    from pgmr.generators.examples import build_examples, with_paraphrases
    from pgmr.generators.rag import CONTEXT_CACHE_FILE, CandidateRetriever, ContextCache, memory_fingerprint
    from pgmr.generators.seq2seq.model import is_encoder_decoder_preset
    from pgmr.generators.seq2seq.train import TrainConfig
    from pgmr.generators.trained import train_generator as train_seq2seq

    retriever: ContextCache | None = None
    data_info: dict[str, Any] = {
        "datasets": [f"{NAME} split (seed {options.seed})"],
        "max_description_words": options.max_description_words,
        "validation_share": options.validation_share,
    }
    if options.paraphrases:
        asked = with_paraphrases(train_part)
        data_info["paraphrases"] = len(asked) - len(train_part)
        train_part = asked
    if mode in RAG_MODES:
        candidates = CandidateRetriever(
            ws.memory,
            k_entities=options.k_entities,
            k_relations=options.k_relations,
            max_description_words=options.candidate_description_words,
        )
        data_info["retriever"] = {"memory": str(ws.settings.memory_dir or "default"), **candidates.settings()}
        # Cached in the run directory, as `pgmr train` does: a resumed call does not retrieve again.
        memory_path = ws.settings.memory_dir or default_memory_dir()
        retriever = ContextCache(
            candidates, run_dir / CONTEXT_CACHE_FILE, memory_id=memory_fingerprint(memory_path)
        )
        questions = [r.question for r in (*train_part, *validation_part)]
        with ws.reporter.progress(f"retrieving candidates for the {mode} inputs", len(questions)) as advance:
            seen = [0]

            def step(done: int, _total: int) -> None:
                advance(done - seen[0])
                seen[0] = done

            retriever.contexts(questions, progress=step)
    with ws.reporter.status(f"building {mode} examples"):
        train_examples = build_examples(
            train_part, mode, retriever=retriever, max_description_words=options.max_description_words
        )
        val_examples = build_examples(
            validation_part, mode, retriever=retriever, max_description_words=options.max_description_words
        )
    try:
        config = TrainConfig(
            preset=options.preset,
            vocab_size=options.vocab_size,
            max_source_len=options.rag_max_source_len if mode in RAG_MODES else options.max_source_len,
            max_target_len=options.max_target_len,
            batch_size=options.batch_size,
            learning_rate=options.learning_rate,
            encoder_learning_rate=(
                options.encoder_learning_rate if is_encoder_decoder_preset(options.preset) else None
            ),
            warmup_steps=options.warmup_steps,
            epochs=options.epochs,
            max_steps=options.max_steps,
            max_minutes=options.max_minutes,
            anneal_to_budget=options.anneal_to_budget,
            bf16=options.bf16,
            eval_steps=options.eval_steps,
            max_eval_examples=options.max_eval_examples,
            seed=options.train_seed,
            progress=ws.settings.progress,
            command=ws.settings.command,
        )
        ws.reporter.note(f"training {mode} ({options.preset}) into {run_dir}")
        result = train_seq2seq(train_examples, val_examples, run_dir, config, data_info=data_info)
    except ValueError as exc:
        raise ExperimentError(f"training {mode}: {exc}") from None
    return {
        "run_dir": str(run_dir),
        "global_step": result.global_step,
        "resumed_from": Path(result.resumed_from).name if result.resumed_from else None,
        "stopped_by_budget": result.stopped_by_budget,
        "wall_seconds": round(result.wall_seconds, 1),
        "parameters": result.parameters,
        "validation": dict(result.metrics),
    }


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
