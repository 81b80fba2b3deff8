"""`pgmr ensemble`: ensemble directories (pgmr.experiments.ensemble_dir), the reranker file fit
(pgmr.experiments.ensemble_rerank) and the verifier's rows (pgmr.experiments.verifier_drafts), without models:
cards stand in for members, and signals for resolved drafts."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.experiments.ensemble_dir import EnsembleDirError, member_dirs, structured_members, write_ensemble
from pgmr.experiments.ensemble_rerank import RerankFitError, fit_reranker, write_fit
from pgmr.pipeline.rerank import FEATURES, Reranker

runner = CliRunner()


def _card(directory: Path, **card: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model_card.json").write_text(json.dumps({"mode": "pgmr", **card}), encoding="utf-8")
    return directory


def _members(root: Path) -> dict[str, Path]:
    return {
        "seq2seq": _card(root / "models" / "s2s", backend="seq2seq"),
        # A training run: its card is in run/model.
        "structured": _card(root / "runs" / "st" / "model", backend="structured").parent,
    }


def test_an_ensemble_card_names_its_members_relative_to_itself(tmp_path: Path) -> None:
    ensemble = tmp_path / "models" / "ens"
    card = write_ensemble(ensemble, _members(tmp_path), description="two", command="pgmr ensemble create")
    assert card["members"] == [
        {"name": "seq2seq", "path": "../s2s"},
        {"name": "structured", "path": "../../runs/st/model"},
    ]
    assert json.loads((ensemble / "model_card.json").read_text(encoding="utf-8")) == card
    assert card["backend"] == "ensemble" and card["description"] == "two"
    assert member_dirs(ensemble) == {
        "seq2seq": (tmp_path / "models" / "s2s").resolve(),
        "structured": (tmp_path / "runs" / "st" / "model").resolve(),
    }
    assert list(structured_members(ensemble)) == ["structured"]


def test_a_verifier_is_copied_in_and_the_reranker_kept(tmp_path: Path) -> None:
    ensemble = tmp_path / "ens"
    (ensemble).mkdir()
    (ensemble / "reranker.json").write_text("{}", encoding="utf-8")
    run = tmp_path / "runs" / "verifier"
    _card(run / "model", backend="verifier")
    (run / "model" / "weights.bin").write_bytes(b"1")
    write_ensemble(ensemble, _members(tmp_path), verifier=run)
    assert (ensemble / "verifier" / "weights.bin").read_bytes() == b"1"
    (run / "model" / "weights.bin").write_bytes(b"2")
    write_ensemble(ensemble, _members(tmp_path), verifier=run / "model")  # replaced whole
    assert (ensemble / "verifier" / "weights.bin").read_bytes() == b"2"
    assert (ensemble / "reranker.json").read_text(encoding="utf-8") == "{}"
    assert [p.name for p in ensemble.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("member", "message"),
    [
        ({"backend": "ensemble"}, "itself an ensemble"),
        ({"mode": "direct"}, "writes 'direct'"),
        (None, "no readable model_card.json"),
    ],
)
def test_bad_members_are_refused_before_anything_is_written(
    tmp_path: Path, member: dict[str, Any] | None, message: str
) -> None:
    bad = tmp_path / "bad"
    if member is None:
        bad.mkdir()
    else:
        _card(bad, **member)
    with pytest.raises(EnsembleDirError, match=message):
        write_ensemble(tmp_path / "ens", {"a": bad})
    assert not (tmp_path / "ens").exists()


def test_a_verifier_directory_must_hold_a_verifier(tmp_path: Path) -> None:
    with pytest.raises(EnsembleDirError, match="not a draft verifier"):
        write_ensemble(
            tmp_path / "ens", _members(tmp_path), verifier=_card(tmp_path / "v", backend="seq2seq")
        )


def test_ensemble_create_command(tmp_path: Path) -> None:
    members = _members(tmp_path)
    args = ["ensemble", "create", str(tmp_path / "ens"), *(f"--member={n}={p}" for n, p in members.items())]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "next: pgmr ensemble fit-rerank" in " ".join(result.output.split())
    result = runner.invoke(app, ["ensemble", "create", str(tmp_path / "e2"), "--member", "a"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["ensemble", "create", str(tmp_path / "e2"), "--member", f"a={tmp_path}"])
    assert result.exit_code == 2 and "member 'a'" in result.output


def _questions(n: int = 120, *, informative: bool = True) -> list[dict[str, Any]]:
    """Two members; the one whose `min_confidence` is higher is right when they disagree."""
    rng = random.Random(1)
    questions = []
    for i in range(n):
        drafts = []
        right_one = rng.choice(("a", "b")) if informative else None
        for source in ("a", "b"):
            signals = dict.fromkeys(FEATURES, 0.0)
            signals["resolved"] = 1.0
            right = source == right_one
            signals["min_confidence"] = (0.8 if right else 0.3) + rng.uniform(-0.1, 0.1)
            drafts.append({"source": source, "signals": signals, "right": right})
        questions.append({"id": str(i), "drafts": drafts})
    return questions


def test_a_reranker_is_fitted_after_the_held_out_questions_and_written(tmp_path: Path) -> None:
    fit = fit_reranker(_questions(), ["a", "b"], held_out=40, provenance={"command": "pgmr x"})
    assert fit.figures["questions"] == {"first": 40, "rest": 80}
    assert fit.figures["first"]["reranked (fitted on the rest)"] > 0.9
    assert fit.reranker.provenance["command"] == "pgmr x"
    assert "after the first 40 questions (80)" in fit.reranker.provenance["fitted_on"]
    ensemble = tmp_path / "ens"
    ensemble.mkdir()
    reranker_path, fit_path = write_fit(ensemble, fit, tmp_path / "fit")
    assert Reranker.from_json(json.loads(reranker_path.read_text(encoding="utf-8"))) == fit.reranker
    assert json.loads(fit_path.read_text(encoding="utf-8"))["questions"]["rest"] == 80


def test_drafts_that_never_disagree_fail_unless_unfitted_is_allowed() -> None:
    same = _questions(30, informative=False)  # every draft wrong
    with pytest.raises(RerankFitError, match="no question where one draft is right"):
        fit_reranker(same, ["a", "b"], held_out=0)
    with pytest.raises(RerankFitError, match="leave none after the first 600"):
        fit_reranker(_questions(), ["a", "b"])
    fit = fit_reranker(same, ["a", "b"], held_out=0, allow_unfitted=True)
    assert fit.figures["unfitted"] and fit.figures["rest"]["oracle"] == 0.0
    assert all(v == 0.0 for w in fit.reranker.weights.values() for v in w.values())
    assert "unfitted" in fit.reranker.provenance["fitted_on"]


def test_fit_rerank_command_from_collected_signals(tmp_path: Path) -> None:
    members = {"a": _card(tmp_path / "a", backend="seq2seq"), "b": _card(tmp_path / "b", backend="seq2seq")}
    ensemble = tmp_path / "ens"
    write_ensemble(ensemble, members)
    rows = tmp_path / "signals.json"
    rows.write_text(json.dumps(_questions()), encoding="utf-8")
    args = ["ensemble", "fit-rerank", str(ensemble), "--rows", str(rows), "-o", str(tmp_path / "fit")]
    result = runner.invoke(app, [*args, "--held-out", "40"])
    assert result.exit_code == 0, result.output
    reranker = json.loads((ensemble / "reranker.json").read_text(encoding="utf-8"))
    # The command line as typed (here, pytest's own: the command runs in-process).
    assert set(reranker["weights"]) == {"a", "b"} and reranker["provenance"]["command"].startswith("pgmr ")
    assert (tmp_path / "fit" / "fit.json").is_file()
    result = runner.invoke(app, args)  # 120 questions, none after the first 600
    assert result.exit_code == 2 and "leave none after the first 600" in " ".join(result.output.split())
    result = runner.invoke(app, ["ensemble", "fit-rerank", str(ensemble)])
    assert result.exit_code == 2 and "--drafts" in result.output


def test_verifier_rows_need_drafts_and_a_structured_member(tmp_path: Path) -> None:
    from pgmr.experiments.verifier_drafts import with_runners_up
    from pgmr.experiments.verifier_fit import DraftRowsError

    with pytest.raises(DraftRowsError, match="with drafts"):
        with_runners_up([{"id": "1", "question": "q"}], {"s": tmp_path}, resolver=None)
    with pytest.raises(DraftRowsError, match="no structured member"):
        with_runners_up([{"id": "1", "question": "q", "drafts": []}], {}, resolver=None)
    ensemble = tmp_path / "ens"
    write_ensemble(ensemble, {"a": _card(tmp_path / "a", backend="seq2seq")})
    drafts = tmp_path / "d.jsonl"
    drafts.write_text('{"id": "1", "question": "q", "drafts": []}\n', encoding="utf-8")
    result = runner.invoke(
        app, ["ensemble", "verifier-drafts", str(ensemble), str(drafts), "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 2 and "no structured member" in " ".join(result.output.split())


def test_only_validation_sets_may_join_a_reranker_fit(tmp_path: Path) -> None:
    """`--also`: another validation set's gold queries join LC-QuAD 2.0 validation's; a test set is refused
    before anything is resolved."""
    from pgmr.config import resolve_data_dir
    from pgmr.experiments.ensemble_rerank import validation_outcomes

    data_dir = resolve_data_dir(None)
    if not (data_dir / "lcquad2").is_dir():
        pytest.skip("no ../shared/data")
    drafts = tmp_path / "drafts.jsonl"
    drafts.write_text(json.dumps({"id": "train_0", "question": "q", "drafts": []}) + "\n")
    with pytest.raises(RerankFitError, match="only validation sets"):
        validation_outcomes(drafts, data_dir, None, tmp_path, also=["qald10-test"])
