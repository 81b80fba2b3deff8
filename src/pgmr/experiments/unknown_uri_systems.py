"""The systems of the lcquad2-unknown-uri experiment: each mode's model trained (or resumed) on the split's
training part with the experiment's recipe, its system spec, and the `pgmr-ensemble` row (the shipped default's
recipe on the split: its members, a reranker fitted on the split's validation part, and an optional verifier).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgmr.experiments.common import ExperimentError, SystemSpec, Workspace
from pgmr.experiments.unknown_uri_split import NAME, UnknownUriOptions, qa_record
from pgmr.generators.base import RAG_MODES

ENSEMBLE = "pgmr-ensemble"  # the row of the default's recipe (seq2seq + structured [+ more], reranked)


def mode_spec(mode: str, run_dir: Path, command: str) -> SystemSpec:
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir

    make = f"{command or 'pgmr experiment ' + NAME} (without --no-train)"
    try:
        model_dir = resolve_model_dir(run_dir)
        card = read_model_card(model_dir)
    except ModelCardError:
        return SystemSpec(mode, mode, run_dir, None, make_command=make)
    return SystemSpec(mode, mode, run_dir, model_dir, card, explicit=True, make_command=make)


def ensemble_spec(
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
    seq2seq = mode_spec("pgmr", ws.out_dir / "runs" / "pgmr", ws.settings.command)
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
    # Without refusal: the reranker learns which draft is right, whatever the threshold (as `pgmr ensemble
    # fit-rerank`).
    no_refusal: dict[str, Any] = {"min_confidence": 0.0, "entity_threshold": 0.0, "relation_threshold": 0.0}
    with ws.reporter.status(f"{ENSEMBLE}: resolving and scoring every validation draft"):
        outcomes = draft_outcomes(
            [r.id for r in validation_part],
            questions,
            drafts,
            {r.id: qa_record(r) for r in validation_part},
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


__all__ = ["ENSEMBLE", "ensemble_spec", "mode_spec", "train_mode"]
