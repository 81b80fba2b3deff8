"""The shipped default's recipe (`pgmr train-default`): every command that rebuilds `models/pgmr-ensemble`
from the data folder, as stages of existing `pgmr` commands.

Why stages of commands rather than one function: each step is the command a reader would type (and the model
cards record), each stage can be rerun alone, and a stage interrupted midway resumes where its trainer
stopped, since `pgmr train` and `pgmr train-verifier` resume from their own checkpoints. The stages, in
order, with what each makes under OUT:

- seq2seq: models/pgmr-default (`pgmr train` with the minilm preset, `pgmr pack`);
- structured, structured-s7: models/pgmr-structured and models/pgmr-structured-s7 (`pgmr train --preset
  structured`, the second with --seed 7, each packed);
- ensemble: models/pgmr-ensemble, its card and a first reranker (`pgmr ensemble create`, `pgmr generate` on
  validation, `pgmr ensemble fit-rerank`);
- verifier: models/pgmr-ensemble/verifier and the reranker refitted with its signal (`pgmr generate --resolve`
  on the train part, `pgmr ensemble verifier-drafts`, `pgmr train-verifier`, `pgmr ensemble create --verifier`,
  `pgmr ensemble fit-rerank`);
- refusal: calibration.json, the refusal threshold chosen on validation for this ensemble (`pgmr experiment
  refusal --split validation`, `pgmr experiment fit-refusal`);
- eval: eval/, LC-QuAD 2.0 test with refusal off, the table of docs/results.md (`pgmr experiment
  lcquad2-original`).

Two configurations: `full`, the commands that made the shipped models (their cards record them), and `tiny`,
the same pipeline with tiny models, a few hundred records and a handful of steps, which runs end to end in a
few minutes on 2 CPU cores (what the tests run). Execution lives in pgmr.experiments.recipe_run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MODELS = "models"
ENSEMBLE = "pgmr-ensemble"
CALIBRATION = "calibration.json"
EVAL_DIR = "eval"
EVAL_EXPERIMENT = "lcquad2-original"
# The published run of the eval's experiment: the full run keeps its direct and rag rows beside its own, as
# docs/results.md shows them (its command has the same --keep-from).
PUBLISHED_EVAL = Path("docs") / "results" / EVAL_EXPERIMENT


@dataclass(frozen=True)
class Step:
    """One `pgmr` command (its arguments after `pgmr --data-dir DIR`) and the path whose presence means it
    is done (a trainer's final model, a file written atomically), so a resumed stage skips it."""

    args: tuple[str, ...]
    makes: Path


@dataclass(frozen=True)
class Stage:
    name: str
    makes: str  # what a reader gets from it, in words
    steps: tuple[Step, ...]
    needs: tuple[str, ...] = ()  # the stages whose outputs its commands read


@dataclass(frozen=True)
class RecipeConfig:
    """The options that differ between the full recipe and the tiny one; everything else is the recipe."""

    name: str
    seq2seq: tuple[str, ...]  # `pgmr train` options of the seq2seq member
    structured: tuple[str, ...]  # `pgmr train --preset structured` options of both structured members
    second_seed: int  # the seed of the second structured member (`structured-s7`)
    batch_size: int  # generation batch size of `pgmr generate` and the experiments
    limit: int | None  # questions of each generate and experiment run (None: all)
    fit_rerank: tuple[str, ...]  # `pgmr ensemble fit-rerank` options
    verifier: tuple[str, ...]  # `pgmr train-verifier` options
    keep_published: bool  # the eval keeps the published direct and rag rows (same questions only)


FULL = RecipeConfig(
    name="full",
    # models/pgmr-default/model_card.json's command (94 min on 2 cores).
    seq2seq=(
        "--preset", "minilm", "--vocab-size", "8000", "--max-description-words", "0", "--batch-size", "32",
        "--lr", "1e-3", "--encoder-lr", "1e-4", "--warmup-steps", "300", "--max-steps", "6000",
        "--max-minutes", "116", "--eval-steps", "500", "--max-eval-examples", "300", "--max-source-len", "64",
        "--max-target-len", "160",
    ),
    # models/pgmr-structured/model_card.json's command; models/pgmr-structured-s7 adds --seed 7 (and kept
    # step 9,000, the best validation step, as packing does by itself).
    structured=(
        "--max-steps", "10000", "--eval-steps", "1000", "--batch-size", "32", "--lr", "1e-3",
        "--encoder-lr", "1e-4", "--warmup-steps", "300", "--max-eval-examples", "600", "--bf16",
    ),
    second_seed=7,
    batch_size=32,
    limit=None,
    fit_rerank=(),
    verifier=(),
    keep_published=True,
)  # fmt: skip

TINY = RecipeConfig(
    name="tiny",
    seq2seq=(
        "--preset", "minilm-tiny", "--limit", "300", "--max-description-words", "0", "--batch-size", "8",
        "--max-steps", "4", "--eval-steps", "4", "--max-eval-examples", "4", "--max-source-len", "32",
        "--max-target-len", "48",
    ),
    structured=(
        "--encoder-layers", "1", "--limit", "300", "--batch-size", "8", "--max-steps", "4", "--eval-steps", "4",
        "--max-eval-examples", "4",
    ),
    second_seed=7,
    batch_size=32,
    limit=24,
    # 24 questions leave none after the first 600, and drafts of models this small are never right.
    fit_rerank=("--held-out", "0", "--allow-unfitted"),
    verifier=("--max-steps", "2", "--layers", "1", "--batch-size", "8"),
    keep_published=False,
)  # fmt: skip

CONFIGS = {c.name: c for c in (FULL, TINY)}


def plan(config: RecipeConfig, out: Path, *, memory_dir: Path | None = None) -> tuple[Stage, ...]:
    """The stages that build the default under `out` (models/, runs/, work/, calibration.json, eval/)."""
    models, runs, work = out / MODELS, out / "runs", out / "work"
    ensemble = models / ENSEMBLE
    memory = ("--memory", str(memory_dir)) if memory_dir is not None else ()
    limit = ("--limit", str(config.limit)) if config.limit is not None else ()
    batch = ("--batch-size", str(config.batch_size))
    validation_drafts = work / "validation.drafts.jsonl"
    members = {
        "seq2seq": "pgmr-default",
        "structured": "pgmr-structured",
        "structured-s7": "pgmr-structured-s7",
    }

    def member_stage(name: str, options: tuple[str, ...]) -> Stage:
        run, packed = runs / name, models / members[name]
        return Stage(
            name,
            f"{MODELS}/{members[name]}",
            (
                Step(
                    ("train", "--mode", "pgmr", "-o", str(run), *options), run / "model" / "model_card.json"
                ),
                Step(("pack", str(run), "-o", str(packed)), packed / "model_card.json"),
            ),
        )

    create: tuple[str, ...] = ("ensemble", "create", str(ensemble))
    for name, directory in members.items():
        create += ("--member", f"{name}={models / directory}")
    train_drafts, nbest = work / "train.drafts.jsonl", work / "train.nbest.jsonl"
    structured = ("--preset", "structured", *config.structured)
    refusal_dir = work / "refusal"
    keep = ("--keep-from", str(PUBLISHED_EVAL)) if config.keep_published and PUBLISHED_EVAL.is_dir() else ()
    return (
        member_stage("seq2seq", (*config.seq2seq, "--no-progress")),
        member_stage("structured", structured),
        member_stage("structured-s7", (*structured, "--seed", str(config.second_seed))),
        Stage(
            "ensemble",
            f"{MODELS}/{ENSEMBLE} (card and a first reranker, without the verifier)",
            (
                Step(create, ensemble / "model_card.json"),
                Step(
                    (
                        "generate",
                        str(ensemble),
                        "lcquad2-validation",
                        *batch,
                        *limit,
                        "-o",
                        str(validation_drafts),
                    ),
                    validation_drafts,
                ),
                _fit_rerank(ensemble, validation_drafts, work / "rerank-first", config, memory),
            ),
            needs=("seq2seq", "structured", "structured-s7"),
        ),
        Stage(
            "verifier",
            f"{MODELS}/{ENSEMBLE}/verifier and the reranker refitted with its signal",
            (
                Step(
                    ("generate", str(ensemble), "lcquad2-train-part", *batch, *limit, "--resolve", *memory)
                    + ("-o", str(train_drafts)),
                    train_drafts,
                ),
                Step(
                    (
                        "ensemble",
                        "verifier-drafts",
                        str(ensemble),
                        str(train_drafts),
                        "-o",
                        str(nbest),
                        *memory,
                    ),
                    nbest,
                ),
                Step(
                    ("train-verifier", str(nbest), "-o", str(runs / "verifier"), *memory, *config.verifier),
                    runs / "verifier" / "model" / "model_card.json",
                ),
                Step(
                    (*create, "--verifier", str(runs / "verifier")), ensemble / "verifier" / "model_card.json"
                ),
                # The validation drafts are the members' and do not change with the verifier: the refit reads
                # the same file and scores each draft with the verifier it now finds in the ensemble.
                _fit_rerank(ensemble, validation_drafts, work / "rerank", config, memory),
            ),
            needs=("ensemble",),
        ),
        Stage(
            "refusal",
            f"{CALIBRATION} (the refusal threshold chosen on validation for this ensemble)",
            (
                Step(
                    ("experiment", "refusal", "--split", "validation", "--models", f"pgmr={ensemble}", *batch)
                    + (*limit, *memory, "--predictions", str(validation_drafts), "-o", str(refusal_dir)),
                    refusal_dir / "metrics.json",
                ),
                Step(
                    ("experiment", "fit-refusal", "--from-sweep", str(refusal_dir / "metrics.json"))
                    + ("--write", str(out / CALIBRATION)),
                    out / CALIBRATION,
                ),
            ),
            needs=("verifier",),
        ),
        Stage(
            "eval",
            f"{EVAL_DIR}/ (LC-QuAD 2.0 test, refusal off: the table of docs/results.md)",
            (
                Step(
                    ("experiment", EVAL_EXPERIMENT, "--models", f"pgmr={ensemble}", *batch, *limit, *memory)
                    + ("--no-refusal", *keep, "-o", str(out / EVAL_DIR)),
                    out / EVAL_DIR / "metrics.json",
                ),
            ),
            needs=("verifier",),
        ),
    )


def _fit_rerank(
    ensemble: Path, drafts: Path, fit_dir: Path, config: RecipeConfig, memory: tuple[str, ...]
) -> Step:
    return Step(
        ("ensemble", "fit-rerank", str(ensemble), "--drafts", str(drafts), "-o", str(fit_dir), *memory)
        + config.fit_rerank,
        fit_dir / "fit.json",
    )


__all__ = [
    "CALIBRATION",
    "CONFIGS",
    "ENSEMBLE",
    "EVAL_DIR",
    "FULL",
    "MODELS",
    "TINY",
    "RecipeConfig",
    "Stage",
    "Step",
    "plan",
]
