"""The pgmr model's outputs for experiments that generate once and resolve many times (refusal against
unanswerable memories, distractors): every question's drafts (one, or an ensemble's members'), read from an
earlier run's JSONL or generated, and written to <out>/generated.jsonl for reuse with --predictions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.datasets import QARecord
from pgmr.experiments.documents import write_rows
from pgmr.experiments.predict import answer_drafts, chosen_texts, generate_draft_lists
from pgmr.experiments.settings import ExperimentError
from pgmr.experiments.systems import decoding_info, load_generator, system_spec
from pgmr.generators.ensemble import RERANKER_FILE, Draft, read_reranker
from pgmr.jsonl import read_jsonl
from pgmr.pipeline.rerank import Reranker, RerankerError, reranker_of

if TYPE_CHECKING:
    from pgmr.experiments.workspace import Workspace

# The source name of a lone output (a model that writes one draft per question).
SINGLE = "model"


def _rows_by_id(path: Path) -> dict[str, Mapping[str, Any]]:
    from pgmr.jsonl import JsonlError

    try:
        return {str(row.get("id")): row for row in read_jsonl(path)}
    except (OSError, JsonlError) as exc:
        raise ExperimentError(f"cannot read predictions {path}: {exc}") from None


def load_predictions(path: Path, records: Sequence[QARecord]) -> list[str]:
    """Raw outputs for `records` from a JSONL of {id, prediction} (e.g. an experiment's generated.jsonl or
    `pgmr generate` output). Raises ExperimentError when the file lacks one of the records."""
    by_id = _rows_by_id(path)
    missing = [r.id for r in records if not isinstance(by_id.get(r.id, {}).get("prediction"), str)]
    if missing:
        raise ExperimentError(
            f"{path} has no 'prediction' for {len(missing)} of the {len(records)} questions "
            f"(e.g. {', '.join(missing[:3])})"
        )
    return [str(by_id[r.id]["prediction"]) for r in records]


def _draft(value: Any, path: Path, qid: str) -> Draft:
    if not isinstance(value, Mapping) or not isinstance(value.get("text"), str) or not value.get("source"):
        raise ExperimentError(f"{path}: question {qid}: a draft needs a 'source' and a 'text': {value!r}")
    confidence = value.get("confidence") or {}
    if not isinstance(confidence, Mapping) or not all(
        isinstance(v, int | float) for v in confidence.values()
    ):
        raise ExperimentError(f"{path}: question {qid}: a draft's 'confidence' maps names to numbers")
    return Draft(str(value["source"]), value["text"], {str(k): float(v) for k, v in confidence.items()})


def load_drafts(path: Path, records: Sequence[QARecord]) -> list[tuple[Draft, ...]]:
    """Every question's drafts from a JSONL: its 'drafts' (as `pgmr generate` and experiments write them for an
    ensemble) or else its 'prediction' as the one draft."""
    by_id = _rows_by_id(path)
    outputs = load_predictions(path, records)
    found: list[tuple[Draft, ...]] = []
    for record, output in zip(records, outputs, strict=True):
        listed = by_id[record.id].get("drafts")
        if listed:
            if not isinstance(listed, list):
                raise ExperimentError(f"{path}: question {record.id}: 'drafts' is not a list")
            found.append(tuple(_draft(d, path, record.id) for d in listed))
        else:
            found.append((Draft(SINGLE, output),))
    return found


def _reranker_at(model_dir: Path | None, sources: Sequence[str]) -> Reranker:
    """The reranker shipped beside an ensemble's card, with the ensemble's verifier, for drafts read from a file."""
    from pgmr.generators.seq2seq.card import ModelCardError
    from pgmr.generators.verifier import VerifierError

    try:
        data = read_reranker(model_dir) if model_dir is not None else None
        if data is None:
            raise ExperimentError(
                f"the predictions hold drafts of {sorted(set(sources))}, and choosing among them needs the "
                f"ensemble's {RERANKER_FILE}: pass --models pgmr=ENSEMBLE_DIR (looked in {model_dir})"
            )
        reranker = Reranker.from_json(data, _verifier_at(model_dir))
        reranker.check_sources(sorted(set(sources)))
    except (ModelCardError, RerankerError, VerifierError) as exc:
        raise ExperimentError(f"cannot use the reranker in {model_dir}: {exc}") from None
    return reranker


def _verifier_at(model_dir: Path | None) -> Any:
    from pgmr.generators.verifier import VERIFIER_DIR, Verifier

    if model_dir is None or not (model_dir / VERIFIER_DIR).is_dir():
        return None
    return Verifier.load(model_dir / VERIFIER_DIR)


def pgmr_drafts(
    ws: Workspace, records: Sequence[QARecord], predictions: Path | None
) -> tuple[list[tuple[Draft, ...]], Reranker | None, dict[str, Any]]:
    """The pgmr model's drafts for `records`, the reranker that chooses among them (None with one draft per
    question) and where they came from: read from `predictions`, else generated once with the pgmr model.
    Written to <out>/generated.jsonl either way ('prediction' is the first draft, 'drafts' all of them)."""
    spec = system_spec("pgmr", ws.settings.models.get("pgmr"))
    reranker: Reranker | None = None
    if predictions is not None:
        drafts = load_drafts(predictions, records)
        source: dict[str, Any] = {"predictions": str(predictions)}
        if any(len(d) > 1 for d in drafts):
            reranker = _reranker_at(spec.model_dir, [x.source for d in drafts for x in d])
            source["reranker"] = str(spec.model_dir / RERANKER_FILE) if spec.model_dir else None
    else:
        if spec.missing:
            raise ExperimentError(
                f"no pgmr model at {spec.requested}; make it with `{spec.how_to_make}`, or pass --models "
                "pgmr=DIR or --predictions FILE"
            )
        started = time.monotonic()
        generator = load_generator(spec, ws.settings)
        drafts = generate_draft_lists(
            generator,
            [r.question for r in records],
            batch_size=ws.settings.batch_size,
            label="generating (pgmr)",
            reporter=ws.reporter,
        )
        reranker = reranker_of(generator) if any(len(d) > 1 for d in drafts) else None
        source = {
            **spec.describe(),
            "generation_seconds": round(time.monotonic() - started, 1),
            **decoding_info(generator),
        }
    write_rows(
        ws.out_dir / "generated.jsonl",
        [
            {
                "id": r.id,
                "question": r.question,
                "prediction": d[0].text,
                **(
                    {
                        "drafts": [
                            {"source": x.source, "text": x.text, "confidence": dict(x.confidence)} for x in d
                        ]
                    }
                    if len(d) > 1
                    else {}
                ),
            }
            for r, d in zip(records, drafts, strict=True)
        ],
    )
    return drafts, reranker, source


def pgmr_outputs(
    ws: Workspace, records: Sequence[QARecord], predictions: Path | None
) -> tuple[list[str], dict[str, Any]]:
    """One output per question: an ensemble's choice is made once, with the full memory and the shipped
    stages (for experiments that study resolution against other memories, not the choice among drafts)."""
    drafts, reranker, source = pgmr_drafts(ws, records, predictions)
    if reranker is None:
        return [d[0].text for d in drafts], source
    chosen = answer_drafts(
        ws.resolver(),
        ws.stages(),
        [r.question for r in records],
        drafts,
        reranker,
        reporter=ws.reporter,
        label="choosing among drafts (full memory)",
    )
    return chosen_texts(chosen, drafts), source


__all__ = ["SINGLE", "load_drafts", "load_predictions", "pgmr_drafts", "pgmr_outputs"]
