"""The structured generator: frames (lossless on real data), training (tiny, real MiniLM layers), resume,
packing, loading through the model card, and `pgmr train --preset structured` from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgmr.config import resolve_data_dir
from pgmr.generators.structured.frames import (
    Span,
    abstract_literals,
    find_span,
    fuzzy_span,
    literal_marks,
    placeholder_counts,
    render_template,
)

DATA_DIR = resolve_data_dir(None)
needs_data = pytest.mark.skipif(not (DATA_DIR / "lcquad2").is_dir(), reason="no ../shared/data")


def test_literals_the_question_contains_become_marks_and_render_back() -> None:
    skeleton = "SELECT ?obj WHERE { wd:entity0 p:relation0 ?s . ?s pq:relation1 ?x filter(contains(YEAR(?x),'2009')) }"
    template, slots = abstract_literals(skeleton, "What was the population of Somalia in 2009?")
    assert template.endswith("filter(contains(YEAR(?x),'{{lit0}}')) }")
    assert slots[0].span.text("What was the population of Somalia in 2009?") == "2009"
    assert render_template(template, ["2009"]) == skeleton
    # A number written with thousands separators, a word the query lower-cases, LIMIT and 'en' kept.
    template, slots = abstract_literals(
        "ASK { wd:entity0 wdt:relation0 ?o filter(?o < 394169) }", "Is it less than 394,169 people?"
    )
    assert "{{lit0|num}}" in template and render_template(template, ["394,169"]).endswith("< 394169) }")
    skeleton = (
        "select ?sbj where { ?sbj rdfs:label ?l . filter(contains(lcase(?l), 'turnip')) . "
        "filter(lang(?l) = 'en') } LIMIT 5"
    )
    template, slots = abstract_literals(skeleton, "Which has the word Turnip in its 5 names?")
    assert literal_marks(template) == [(0, "lower")]
    assert "'en'" in template and template.endswith("LIMIT 5")
    assert render_template(template, ["Turnip"]) == skeleton
    # A quote inside a copied literal is escaped, so the skeleton still lexes.
    assert render_template("filter(contains(?x, '{{lit0}}'))", ["d'Arc"]) == "filter(contains(?x, 'd\\'Arc'))"
    with pytest.raises(ValueError, match="lit1"):
        render_template("'{{lit1}}'", ["a"])


def test_spans_are_whole_words_and_fuzzy_spans_take_misspellings() -> None:
    question = "When did Veronica Lake and Andre dé Toth end their relationship in Lakeland?"
    span = find_span(question, ["Lake", "Veronica Lake"])
    assert span is not None and span.text(question) == "Veronica Lake"
    assert find_span("Lakeland only", ["Lake"]) is None
    fuzzy = fuzzy_span(question, ["André de Toth"], 75)
    assert fuzzy is not None and fuzzy.text(question) == "Andre dé Toth"
    assert fuzzy_span(question, ["Paris"], 75) is None
    assert placeholder_counts("SELECT ?x { wd:entity1 wdt:relation0 ?x . wd:entity0 p:relation1 ?s }") == (
        2,
        2,
    )
    assert Span(0, 4).text("When") == "When"


@needs_data
def test_frames_reproduce_every_gold_skeleton_of_real_records() -> None:
    """template + gold literal spans renders back the converted skeleton exactly, for 2,000 real records."""
    from pgmr.conversion import ConversionSummary, convert_records
    from pgmr.datasets import load_named
    from pgmr.generators.structured.frames import apply_transform
    from pgmr.generators.structured.targets import frame_target
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.query import parse

    catalog = LabelCatalog.from_data_dir(DATA_DIR)
    records = list(
        convert_records(load_named("lcquad2-train", DATA_DIR).records[:2000], catalog, ConversionSummary())
    )
    marked = 0
    for record in records:
        target = frame_target(record.question, record, catalog)
        literals = [s.span.text(target.question) for s in target.literals]
        marked += bool(literals)
        assert render_template(target.template, literals) == parse(record.intermediate).skeleton
        for slot, (_, transform) in zip(target.literals, literal_marks(target.template), strict=True):
            assert slot.transform == transform
            assert apply_transform(slot.span.text(target.question), transform)
        assert len(target.entity_spans) == len(target.entity_ids)
    assert marked > 200  # literals are common (years, numbers, words): the test exercises marks


@pytest.fixture(scope="module")
def tiny_run(tiny_structured):  # type: ignore[no-untyped-def]
    return tiny_structured


def build_tiny_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """40 real records, their properties plus 200 others, a 1-layer MiniLM, 120 steps of 8 (conftest's
    session fixture `tiny_structured`: the relation ranker's tests train on it too)."""
    if not (DATA_DIR / "lcquad2").is_dir():
        pytest.skip("no ../shared/data")
    from pgmr.conversion import ConversionSummary, convert_records
    from pgmr.datasets import load_named
    from pgmr.generators.structured.targets import build_vocabulary, frame_targets
    from pgmr.generators.structured.train import StructuredTrainConfig, train_structured
    from pgmr.kg.catalog import LabelCatalog

    full = LabelCatalog.from_data_dir(DATA_DIR)
    records = list(
        # Every 500th record: a spread of templates (the file is grouped by source; the first 40 share one).
        convert_records(load_named("lcquad2-train", DATA_DIR).records[::500][:40], full, ConversionSummary())
    )
    used = {wid for r in records for _, wid in r.mapping}
    others = sorted(e.id for e in full.of_kind("relation"))[:200]
    catalog = LabelCatalog([e for e in (full.get(i) for i in used | set(others)) if e is not None])
    targets = frame_targets(records, catalog)
    vocab = build_vocabulary(targets, catalog, min_fallback=1)
    out = tmp_path_factory.mktemp("structured") / "run"
    config = StructuredTrainConfig(
        max_steps=120,
        batch_size=8,
        eval_steps=60,
        warmup_steps=10,
        encoder_layers=1,
        learning_rate=3e-3,
        encoder_learning_rate=3e-4,
        max_eval_examples=40,
    )
    card = train_structured(targets, targets, vocab, out, config)
    return out, card, targets, vocab, config


def test_tiny_training_learns_its_training_frames(tiny_run) -> None:  # type: ignore[no-untyped-def]
    out, card, targets, vocab, _ = tiny_run
    assert len(vocab.templates) >= 8
    for name in (
        "model_card.json",
        "heads.json",
        "encoder_config.json",
        "structure_vocab.json",
        "weights.safetensors",
    ):
        assert (out / "model" / name).is_file(), name
    assert card["backend"] == "structured" and card["mode"] == "pgmr"
    assert [h["step"] for h in card["history"]] == [60, 120]
    final = card["history"][-1]
    # Memorising 40 questions is easy for a real encoder layer and heads that work; broken heads stay near 0.
    assert final["template_accuracy"] >= 0.9
    assert final["frame_exact"] >= 0.5, final


def test_generator_loads_by_card_and_writes_parseable_sparql_pgmr(tiny_run) -> None:  # type: ignore[no-untyped-def]
    from pgmr.generators.structured.generator import StructuredGenerator
    from pgmr.generators.trained import load_trained
    from pgmr.query import parse

    out, _, targets, _, _ = tiny_run
    generator = load_trained(out)
    assert isinstance(generator, StructuredGenerator) and generator.mode == "pgmr"
    questions = [t.question for t in targets[:12]]
    texts = generator.generate(questions, batch_size=5)
    assert len(texts) == 12
    for text in texts:
        query = parse(text)  # the gate every output meets
        assert all("Q" not in p.name for p in query.placeholders)
    # The same question gives the same output alone and inside a batch.
    assert generator.generate(questions[3:4]) == texts[3:4]
    confidences = generator.confidences(questions[:4])
    for text, conf in zip(texts[:4], confidences, strict=True):
        assert set(conf) == set(parse(text).names)
        assert all(0.0 < c <= 1.0 for c in conf.values())
    # What an ensemble's reranker reads: the same texts, with the shape's and the weakest slot's probability.
    scored = generator.generate_with_confidence(questions[:4])
    assert [t for t, _ in scored] == texts[:4]
    for (_, reported), per_slot in zip(scored, confidences, strict=True):
        assert set(reported) == {"template", "slots"} and 0.0 < reported["template"] <= 1.0
        assert reported["slots"] == pytest.approx(min(per_slot.values()) / reported["template"], rel=1e-5)
    from pgmr.generators.ensemble import EnsembleGenerator, generate_drafts

    (drafts,) = generate_drafts(EnsembleGenerator([("structured", generator)], None), questions[:1])
    assert drafts[0].text == texts[0]
    # Alone vs in a batch: float noise, which in bfloat16 (precision auto on a CPU with AVX512-BF16 or AMX, whose
    # kernels round differently by batch shape and thread count) reached ~4e-5 with two threads and 1.1e-3 with
    # one (OMP_NUM_THREADS=1, 2026-12-05); bfloat16 keeps 8 bits of mantissa, so 1e-2 is still far tighter than
    # any real difference between the two paths.
    assert drafts[0].confidence == pytest.approx(scored[0][1], rel=1e-2)


def test_runners_up_come_from_the_same_forward_pass(tiny_run) -> None:  # type: ignore[no-untyped-def]
    """The verifier's extra training drafts (`pgmr ensemble verifier-drafts`): each question's top frame is the one
    generation writes; `+t2` has another template; `+r2` changes exactly one relation slot to a property the
    frame does not already use."""
    from pgmr.experiments.runners_up import runner_up_drafts
    from pgmr.generators.structured.generator import StructuredGenerator
    from pgmr.query import parse

    out, _, targets, _, _ = tiny_run
    generator = StructuredGenerator.load(out / "model")
    questions = [t.question for t in targets[:12]]
    texts = generator.generate(questions, batch_size=5)
    found = generator.runners_up(questions, batch_size=5)
    assert [r.top.query().to_text() for r in found] == texts
    swaps = 0
    for runners in found:
        top, second, swapped = runners.top, runners.second_template, runners.swapped_relation
        assert second.template != top.template
        parse(second.query().to_text())
        if not top.relations:
            assert swapped is None
            continue
        assert swapped is not None and swapped.template == top.template and swapped.entities == top.entities
        changed = [i for i, (a, b) in enumerate(zip(top.relations, swapped.relations, strict=True)) if a != b]
        assert len(changed) == 1
        assert swapped.relations[changed[0]].label not in {v.label for v in top.relations}
        parse(swapped.query().to_text())
        swaps += 1
    assert swaps > 0
    rows = [
        {"id": str(i), "question": q, "drafts": [{"source": "st", "text": t}]}
        for i, (q, t) in enumerate(zip(questions, texts, strict=True))
    ]
    extra, differ = runner_up_drafts(rows, {"st": out / "model"}, batch_size=5)
    assert differ["st"] == 0 and set(extra) == {r["id"] for r in rows}
    for row, runners in zip(rows, found, strict=True):
        t2, r2 = extra[row["id"]]
        assert (t2["source"], t2["text"]) == ("st+t2", runners.second_template.query().to_text())
        assert 0.0 < t2["confidence"]["template"] <= 1.0
        assert r2["source"] == "st+r2"
        assert r2["text"] == (runners.swapped_relation or runners.top).query().to_text()
    with pytest.raises(ValueError, match="no draft from member"):
        runner_up_drafts(rows, {"other": out / "model"})


def test_rerun_resumes_from_the_checkpoint_and_extends_the_history(tiny_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import shutil
    from dataclasses import replace

    from pgmr.generators.structured.train import train_structured

    out, _, targets, vocab, config = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    card = train_structured(targets, targets, vocab, copy, replace(config, max_steps=140, eval_steps=20))
    assert [h["step"] for h in card["history"]] == [60, 120, 140]
    # A checkpoint from other data is refused instead of silently mixing runs.
    with pytest.raises(ValueError, match="another run"):
        train_structured(targets, targets, vocab, copy, replace(config, max_steps=160, seed=7))


def test_packed_model_writes_what_the_full_model_writes(tiny_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pgmr.generators.structured.generator import StructuredGenerator
    from pgmr.generators.structured.store import StructuredModelError, load_model, pack_structured

    out, _, targets, _, _ = tiny_run
    info = pack_structured(out / "model", tmp_path / "packed")
    assert info["quantized_parameters"] > info["float_parameters"]
    full = StructuredGenerator.load(out / "model")
    packed = StructuredGenerator.load(tmp_path / "packed")
    questions = [t.question for t in targets]
    same = sum(a == b for a, b in zip(full.generate(questions), packed.generate(questions), strict=True))
    assert same >= 0.9 * len(questions)
    (tmp_path / "packed" / "heads.json").write_text(
        json.dumps({**json.loads((out / "model" / "heads.json").read_text()), "templates": 1})
    )
    with pytest.raises(StructuredModelError, match="does not match"):
        load_model(tmp_path / "packed")


@needs_data
def test_pgmr_train_preset_structured_from_the_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pgmr.cli.main import app

    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "--data-dir",
            str(DATA_DIR),
            "train",
            "--mode",
            "pgmr",
            "--preset",
            "structured",
            "-o",
            str(out),
            "--limit",
            "60",
            "--encoder-layers",
            "1",
            "--max-steps",
            "6",
            "--eval-steps",
            "3",
            "--batch-size",
            "4",
            "--max-eval-examples",
            "8",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    card = json.loads((out / "model" / "model_card.json").read_text())
    assert card["steps"] == 6 and card["run"]["command"].startswith("pgmr")
    bad = CliRunner().invoke(
        app,
        [
            "--data-dir",
            str(DATA_DIR),
            "train",
            "--mode",
            "direct",
            "--preset",
            "structured",
            "-o",
            str(tmp_path / "x"),
            "--limit",
            "60",
        ],
    )
    assert bad.exit_code == 2 and "structured" in bad.output


def test_relation_lexicon_marks_properties_the_question_names() -> None:
    from pgmr.generators.structured.decoding import RelationLexicon
    from pgmr.generators.structured.targets import Choice, Vocabulary

    vocab = Vocabulary(
        templates=("ASK { wd:entity0 wdt:relation0 ?x }",),
        relations=(
            Choice("P19", "place of birth", ""),
            Choice("P1394", "Glottolog code", ""),
            Choice("P50", "author", ""),
        ),
        relation_aliases=(("birthplace", "born in"), (), ()),
        fallbacks=(),
        entity_slots=1,
        relation_slots=1,
        literal_slots=1,
    )
    features = RelationLexicon(vocab).features(
        ["What is the Glottolog code of Swahili?", "Where was Bach born in?", "Which authority wrote it?"]
    )
    assert features.shape == (3, 3, 3)
    assert features[0, 1].tolist() == [1.0, 0.0, 0.5]  # label, two words
    assert features[0, 0].sum() == 0 and features[0, 2].sum() == 0
    assert features[1, 0].tolist() == [0.0, 1.0, 0.0]  # an alias only
    assert features[2].sum() == 0  # "authority" is not the word "author"


def test_a_run_can_start_from_a_trained_model(tiny_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`init_from`: the new run starts with the trained model's weights (so it starts as good as it), and a model
    of another vocabulary is refused."""
    from dataclasses import replace

    from pgmr.generators.structured.targets import build_vocabulary
    from pgmr.generators.structured.train import train_structured

    out, card, targets, vocab, config = tiny_run
    started = replace(config, max_steps=1, eval_steps=1, learning_rate=0.0, encoder_learning_rate=0.0)
    again = train_structured(targets, targets, vocab, tmp_path / "a", replace(started, init_from=str(out / "model")))
    kept = next(h for h in card["history"] if h["step"] == card["best_step"])
    assert again["history"][0]["frame_exact"] == kept["frame_exact"] >= 0.5
    scratch = train_structured(targets, targets, vocab, tmp_path / "b", started)
    assert scratch["history"][0]["frame_exact"] < 0.5
    from pgmr.kg.catalog import LabelCatalog

    other = build_vocabulary(targets[:5], LabelCatalog(), min_fallback=1)
    with pytest.raises(ValueError, match="vocabulary or heads differ"):
        train_structured(targets[:5], targets[:5], other, tmp_path / "c", replace(started, init_from=str(out / "model")))
