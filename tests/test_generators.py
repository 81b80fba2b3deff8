"""Generators: examples per mode, candidate retrieval, tokenizer, and a tiny T5 trained, resumed and loaded."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pgmr.conversion import ConvertedRecord, convert_sparql
from pgmr.generators import MODES, CandidateRetriever, Generator, build_examples, question_ngrams
from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.query import parse

ENTITIES = {
    "Q1055": ("Hamburg", "city and state in northern Germany, second largest city of the country"),
    "Q64": ("Berlin", "capital and largest city of Germany"),
    "Q183": ("Germany", "country in Central Europe"),
    "Q142": ("France", "country in Western Europe"),
    "Q90": ("Paris", "capital and largest city of France"),
    "Q5": ("human", None),
}
PROPERTIES = {
    "P1082": ("population", "number of people inhabiting the place; number of people of subject"),
    "P36": (
        "capital",
        "seat of government of a country, province, state or other type of administrative area",
    ),
    "P31": ("instance of", "that class of which this subject is a particular example and member"),
}
CATALOG = LabelCatalog(
    [CatalogEntry(i, label, desc) for i, (label, desc) in {**ENTITIES, **PROPERTIES}.items()]
)


def _record(uid: int, question: str, sparql: str) -> ConvertedRecord:
    query, mapping = convert_sparql(sparql, CATALOG)
    return ConvertedRecord(str(uid), question, sparql, query.to_text(), tuple(mapping.items()), "test")


def _records() -> list[ConvertedRecord]:
    records = []
    for qid in ("Q1055", "Q64", "Q183", "Q142", "Q90"):
        name = ENTITIES[qid][0]
        for pid, template in (
            ("P1082", "How many people live in {}?"),
            ("P36", "What is the capital of {}?"),
        ):
            sparql = f"SELECT ?x WHERE {{ wd:{qid} wdt:{pid} ?x }}"
            records.append(_record(len(records), template.format(name), sparql))
        records.append(_record(len(records), f"Is {name} a human?", f"ASK {{ wd:{qid} wdt:P31 wd:Q5 }}"))
    records.append(
        _record(len(records), "Is Berlin the capital of Germany?", "ASK { wd:Q183 wdt:P36 wd:Q64 }")
    )
    return records


RECORDS = _records()  # 16


@pytest.fixture(scope="module")
def retriever(encoder) -> CandidateRetriever:  # type: ignore[no-untyped-def]
    from pgmr.memory import Memory

    memory = Memory.build_in_memory(CATALOG, encoder)
    return CandidateRetriever(memory, k_entities=2, k_relations=2)


def test_context_cache_retrieves_once_and_survives_a_torn_file(
    retriever: CandidateRetriever, tmp_path: Path
) -> None:
    from pgmr.generators.rag import ContextCache

    questions = [r.question for r in RECORDS]
    expected = retriever.contexts(questions)
    path = tmp_path / "run" / "rag-contexts.jsonl"
    calls: list[tuple[int, int]] = []
    cache = ContextCache(retriever, path, memory_id="m1", chunk=5)
    assert cache.contexts(questions, progress=lambda done, total: calls.append((done, total))) == expected
    unique = len(set(questions))
    assert calls[-1] == (unique, unique) and len(calls) == -(-unique // 5)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["retriever"]["k_entities"] == 2 and len(lines) == 1 + unique

    # Second run: nothing left to retrieve, nothing appended.
    calls.clear()
    assert (
        ContextCache(retriever, path, memory_id="m1").contexts(
            questions, progress=lambda d, t: calls.append((d, t))
        )
        == expected
    )
    assert calls == [] and path.read_text(encoding="utf-8").splitlines() == lines

    # An interrupted write leaves a torn last line: that question alone is retrieved again.
    torn = "\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2]
    path.write_text(torn, encoding="utf-8")
    calls.clear()
    assert (
        ContextCache(retriever, path, memory_id="m1").contexts(
            questions, progress=lambda d, t: calls.append((d, t))
        )
        == expected
    )
    assert calls == [(1, 1)]
    assert (
        ContextCache(retriever, path, memory_id="m1").contexts(questions) == expected
    )  # file still readable

    # Another memory (or other retriever settings): the file is not trusted, it is rebuilt.
    other = CandidateRetriever(retriever.memory, k_entities=1, k_relations=1)
    fresh = ContextCache(other, path, memory_id="m1").contexts(questions)
    assert fresh == other.contexts(questions) and fresh != expected
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0])["retriever"]["k_entities"] == 1
    calls.clear()
    ContextCache(other, path, memory_id="m2").contexts(questions, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (unique, unique)


def test_pgmr_examples_parse_and_cut_descriptions() -> None:
    examples = build_examples(RECORDS, "pgmr", max_description_words=2)
    assert [e.source for e in examples[:2]] == [
        "How many people live in Hamburg?",
        "What is the capital of Hamburg?",
    ]
    for example in examples:
        query = parse(example.target)
        assert query.to_text() == example.target
        assert all(len(p.description.split()) <= 2 for p in query.placeholders)
    assert "entity0 = [ENT] Hamburg [/ENT] city and\n" in examples[0].target
    no_desc = parse(build_examples(RECORDS[:1], "pgmr", max_description_words=0)[0].target)
    assert [p.description for p in no_desc.placeholders] == ["", ""]
    whole = build_examples(RECORDS[:1], "pgmr", max_description_words=None)[0].target
    assert whole == RECORDS[0].intermediate


def test_direct_examples_carry_ids_without_prefixes() -> None:
    examples = build_examples(RECORDS, "direct")
    assert examples[0].target == "SELECT ?x WHERE { wd:Q1055 wdt:P1082 ?x }"
    assert examples[-1].target == "ASK { wd:Q183 wdt:P36 wd:Q64 }"
    assert all("wd:Q" in e.target and "PREFIX" not in e.target and "entity" not in e.target for e in examples)


def test_rag_examples_need_a_retriever() -> None:
    with pytest.raises(ValueError, match="CandidateRetriever"):
        build_examples(RECORDS, "rag")
    with pytest.raises(ValueError, match="unknown mode"):
        build_examples(RECORDS, "nope")


def test_question_ngrams_skip_stop_words() -> None:
    grams = question_ngrams("What is the capital of Germany?")
    assert "capital" in grams and "Germany" in grams and "capital of Germany" in grams
    assert "What is" not in grams and "of" not in grams and "is the" not in grams


def test_rag_sources_list_candidates(retriever: CandidateRetriever) -> None:
    rag = build_examples(RECORDS[:3], "rag", retriever=retriever)
    rag_pgmr = build_examples(RECORDS[:3], "rag-pgmr", retriever=retriever)
    question, *lines = rag[0].source.split("\n")
    assert question == "How many people live in Hamburg?"
    assert len(lines) == 4  # 2 entities, then 2 relations
    assert lines[0] == "Q1055 Hamburg: city and state in northern Germany, second largest"  # 8 words
    assert any(line.startswith("P1082 population: ") for line in lines[2:])
    assert rag[0].target == "SELECT ?x WHERE { wd:Q1055 wdt:P1082 ?x }"
    assert [e.source for e in rag_pgmr] == [e.source for e in rag]
    assert all(parse(e.target) for e in rag_pgmr)
    assert retriever.contexts([]) == []


def test_retriever_from_a_cards_settings_rebuilds_the_training_blocks(retriever: CandidateRetriever) -> None:
    rebuilt = CandidateRetriever.from_settings(retriever.memory, retriever.settings())
    questions = [r.question for r in RECORDS[:4]]
    assert rebuilt.settings() == retriever.settings() and rebuilt.contexts(questions) == retriever.contexts(
        questions
    )
    # Cards written before a setting existed: the defaults of the time (5 + 5 candidates, 8 words).
    assert CandidateRetriever.from_settings(retriever.memory, None).settings() == {
        "k_entities": 5,
        "k_relations": 5,
        "max_n": 3,
        "max_description_words": 8,
    }
    labels_only = CandidateRetriever.from_settings(
        retriever.memory, {**retriever.settings(), "max_description_words": 0}
    )
    block = labels_only.context("How many people live in Hamburg?").split("\n")
    assert block[0] == "Q1055 Hamburg" and all(":" not in line for line in block)


def test_tokenizer_round_trips_newlines_and_unicode() -> None:
    from pgmr.generators.seq2seq import keeps_newlines, train_tokenizer

    texts = [t for e in build_examples(RECORDS, "pgmr") for t in (e.source, e.target)]
    tokenizer = train_tokenizer(texts, vocab_size=400)
    assert len(tokenizer) <= 400 and keeps_newlines(tokenizer)
    for text in [*texts, "Zürich ?x .\n\n  x0 = [ENT] São Paulo [/ENT] 東京"]:
        ids = tokenizer(text)["input_ids"]
        assert ids[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(ids, skip_special_tokens=True) == text


TINY = {
    "preset": "tiny",
    "vocab_size": 320,
    "max_source_len": 32,
    "max_target_len": 48,
    "batch_size": 8,
    "eval_steps": 2,
    "warmup_steps": 0,
    "logging_steps": 100,
    "progress": False,
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from pgmr.generators.seq2seq import TrainConfig, train_seq2seq

    examples = build_examples(RECORDS, "pgmr", max_description_words=2)
    examples = examples + [replace(e, id=f"{e.id}b") for e in examples[:6]]  # 22
    out = tmp_path_factory.mktemp("gen") / "run"
    config = TrainConfig(max_steps=2, command="pgmr train --mode pgmr", **TINY)  # type: ignore[arg-type]
    result = train_seq2seq(examples[:18], examples[18:], out, config, data_info={"datasets": ["handmade"]})
    return examples, out, config, result


def test_training_writes_a_complete_model_dir(trained) -> None:  # type: ignore[no-untyped-def]
    _, out, _, result = trained
    model_dir = out / "model"
    assert result.model_dir == model_dir and result.global_step == 2 and result.resumed_from is None
    for name in ("model.safetensors", "config.json", "tokenizer.json", "model_card.json", "README.md"):
        assert (model_dir / name).is_file(), name
    card = json.loads((model_dir / "model_card.json").read_text())
    assert card["mode"] == "pgmr" and card["model"]["preset"] == "tiny"
    assert 0 < card["model"]["parameters"] < 50_000
    assert card["data"]["datasets"] == ["handmade"] and card["data"]["train_examples"] == 18
    assert card["training"]["global_step"] == 2 and card["command"] == "pgmr train --mode pgmr"
    assert {"exact_match", "parse_rate", "token_accuracy"} <= set(card["validation"])
    assert "pgmr" in (model_dir / "README.md").read_text()
    assert not list(out.glob(".model.*"))  # no temp dir left behind


def test_loaded_generator_generates_a_batch(trained) -> None:  # type: ignore[no-untyped-def]
    from pgmr.generators.seq2seq import Seq2SeqGenerator

    _, out, _, _ = trained
    generator = Seq2SeqGenerator.load(out, max_new_tokens=8)  # the run dir resolves to run/model
    assert isinstance(generator, Generator) and generator.mode == "pgmr" and generator.mode in MODES
    questions = ["How many people live in Paris?", "Is France a human?", "What is the capital of Germany?"]
    outputs = generator.generate(questions, batch_size=2)
    assert len(outputs) == 3 and all(isinstance(o, str) for o in outputs)
    assert generator.generate(questions[1:2]) == [outputs[1]]  # batching and order do not change outputs


def test_second_call_resumes_from_the_checkpoint(trained) -> None:  # type: ignore[no-untyped-def]
    from pgmr.generators.seq2seq import TrainConfig, train_seq2seq

    examples, out, config, _ = trained
    from pgmr.generators.seq2seq.checkpoints import recorded_seconds

    first_call = recorded_seconds(out / "checkpoints" / "checkpoint-2")
    assert first_call > 0
    result = train_seq2seq(examples[:18], examples[18:], out, replace(config, max_steps=4))
    assert result.resumed_from is not None and Path(result.resumed_from).name == "checkpoint-2"
    assert result.global_step == 4
    card = json.loads((out / "model" / "model_card.json").read_text())
    assert card["training"]["global_step"] == 4
    # The card's time is the whole run's: the first call's two steps and this call's.
    assert (
        card["training"]["wall_seconds"] == round(result.wall_seconds, 1) and result.wall_seconds > first_call
    )
    # A run that already reached its steps is not trained again (the Trainer would take a 5th step) and keeps
    # its card.
    again = train_seq2seq(examples[:18], examples[18:], out, replace(config, max_steps=4))
    assert (
        again.global_step == 4
        and again.card == card
        and again.wall_seconds == card["training"]["wall_seconds"]
    )
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["checkpoint-2", "checkpoint-4"]
    assert json.loads((out / "model" / "model_card.json").read_text()) == card
    with pytest.raises(ValueError, match="mode"):
        direct = build_examples(RECORDS, "direct")
        train_seq2seq(direct[:12], direct[12:], out, TrainConfig(max_steps=1, **TINY))  # type: ignore[arg-type]


def test_budget_stop_keeps_a_loadable_best_model(trained, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pgmr.generators.seq2seq import Seq2SeqGenerator, train_seq2seq

    examples, _, config, _ = trained
    budget = replace(config, max_steps=1000, max_minutes=1e-5)
    result = train_seq2seq(examples[:18], examples[18:], tmp_path / "run", budget)
    assert result.stopped_by_budget and result.global_step == 1
    assert (tmp_path / "run" / "checkpoints" / "checkpoint-1").is_dir()
    generator = Seq2SeqGenerator.load(result.model_dir, max_new_tokens=4)
    assert len(generator.generate(["Is Paris a human?"])) == 1


def test_budget_schedule_decays_by_steps_or_by_the_clock_whichever_is_further() -> None:
    import time

    from pgmr.generators.seq2seq.train import WallClockBudget, budget_schedule

    fresh = WallClockBudget(3600.0)  # almost nothing of an hour spent: the steps decide
    schedule = budget_schedule(10, 110, fresh)
    assert schedule(0) == 0.0 and schedule(5) == 0.5
    assert schedule(60) == pytest.approx(0.5, abs=1e-3) and schedule(110) == 0.0
    half = WallClockBudget(
        100.0, started=time.monotonic() - 50.0
    )  # half of the budget spent: the clock decides
    schedule = budget_schedule(10, 110, half)
    assert schedule(5) == 0.5  # warmup goes by steps
    assert schedule(11) == pytest.approx(0.5, abs=0.02)  # 1% of the steps, 50% of the time
    assert schedule(100) == pytest.approx(0.1, abs=1e-3)  # 90% of the steps: further than the clock
    spent = WallClockBudget(10.0, started=time.monotonic() - 20.0)
    assert budget_schedule(0, 100, spent)(1) == 0.0
    # A resumed call: its first step is at 60% of the decay; the rest is spread over this call's budget.
    resumed = budget_schedule(0, 100, WallClockBudget(100.0, started=time.monotonic() - 50.0))
    assert resumed(60) == pytest.approx(1.0 - (0.6 + 0.4 * 0.5), abs=0.02)


def test_bf16_on_cpu_with_the_budget_schedule_trains_and_records_it(tmp_path: Path) -> None:
    """bfloat16 autocast on a machine without an accelerator (the Trainer needs use_cpu for it), and a learning
    rate that reaches 0 when the wall budget does, read back from the trainer's own log."""
    from pgmr.generators.seq2seq import TrainConfig, train_seq2seq

    examples = build_examples(RECORDS, "pgmr", max_description_words=2)
    config = TrainConfig(
        max_steps=4, bf16=True, anneal_to_budget=True, max_minutes=60.0, **{**TINY, "logging_steps": 1}
    )  # type: ignore[arg-type]
    result = train_seq2seq(examples[:12], examples[12:], tmp_path / "run", config)
    assert result.global_step == 4 and not result.stopped_by_budget
    card = json.loads((result.model_dir / "model_card.json").read_text())
    assert card["training"]["config"]["bf16"] and card["training"]["config"]["anneal_to_budget"]
    state = json.loads((tmp_path / "run" / "checkpoints" / "checkpoint-4" / "trainer_state.json").read_text())
    rates = [row["learning_rate"] for row in state["log_history"] if "learning_rate" in row]
    assert len(rates) == 4 and rates == sorted(rates, reverse=True) and rates[0] > rates[-1]
    with pytest.raises(ValueError, match="max_minutes"):
        TrainConfig(anneal_to_budget=True)


def test_warm_started_preset_trains_resumes_and_generates(tmp_path: Path) -> None:
    """The MiniLM-encoder preset: pretrained encoder with its own tokenizer, target BPE for the decoder."""
    from pgmr.generators.seq2seq import Seq2SeqGenerator, TrainConfig, train_seq2seq
    from pgmr.generators.seq2seq.model import SOURCE_TOKENIZER_DIR

    examples = build_examples(RECORDS, "pgmr", max_description_words=2)
    config = TrainConfig(
        max_steps=2, encoder_learning_rate=1e-4, **{**TINY, "preset": "minilm-tiny", "vocab_size": 400}
    )  # type: ignore[arg-type]
    out = tmp_path / "run"
    first = train_seq2seq(examples[:12], examples[12:], out, config)
    model_dir = first.model_dir
    assert (model_dir / SOURCE_TOKENIZER_DIR / "tokenizer.json").is_file()
    card = json.loads((model_dir / "model_card.json").read_text())
    assert card["model"]["architecture"] == "EncoderDecoderModel"
    # The encoder is the pretrained MiniLM (22M parameters with its embeddings), not a fresh one.
    assert card["model"]["parameters"] > 20_000_000
    generator = Seq2SeqGenerator.load(out, max_new_tokens=6)
    assert generator.source_tokenizer is not generator.tokenizer
    outputs = generator.generate(["How many people live in Paris?", "Is France a human?"], batch_size=1)
    assert len(outputs) == 2 and generator.generate(["Is France a human?"]) == [outputs[1]]
    resumed = train_seq2seq(examples[:12], examples[12:], out, replace(config, max_steps=3))
    assert resumed.resumed_from is not None and resumed.global_step == 3


def test_a_trained_model_is_a_base_to_go_on_from(tmp_path: Path) -> None:
    """`--base` accepts a model `pgmr train` wrote, packed too (how the default ships): training goes on from its
    weights with its two tokenizers, and resumes like any run."""
    import torch

    from pgmr.generators.seq2seq import Seq2SeqGenerator, TrainConfig, train_seq2seq
    from pgmr.generators.seq2seq.model import SOURCE_TOKENIZER_DIR
    from pgmr.generators.seq2seq.packing import load_packed, pack_model_dir

    examples = build_examples(RECORDS, "pgmr", max_description_words=2)
    config = TrainConfig(
        max_steps=2, encoder_learning_rate=1e-3, **{**TINY, "preset": "minilm-tiny", "vocab_size": 400}
    )  # type: ignore[arg-type]
    first = train_seq2seq(examples[:12], examples[12:], tmp_path / "first", config)
    pack_model_dir(first.model_dir, tmp_path / "packed")
    # Learning rate 0: the continued model must be the base itself, weight for weight, not a fresh preset.
    still = replace(config, base=str(tmp_path / "packed"), learning_rate=0.0, encoder_learning_rate=0.0)
    out = tmp_path / "continued"
    result = train_seq2seq(examples[:12], examples[12:], out, replace(still, max_steps=1))
    assert (out / SOURCE_TOKENIZER_DIR / "tokenizer.json").is_file()
    assert (result.model_dir / SOURCE_TOKENIZER_DIR / "tokenizer.json").is_file()
    card = json.loads((result.model_dir / "model_card.json").read_text())
    assert card["model"] == {**card["model"], "base": str(tmp_path / "packed")}
    base_state = load_packed(tmp_path / "packed").state_dict()
    # float32: the weights themselves are compared (inference precision `auto` may be bfloat16).
    continued = Seq2SeqGenerator.load(result.model_dir, max_new_tokens=6, precision="fp32")
    for name, tensor in continued.model.state_dict().items():
        assert torch.equal(tensor, base_state[name]), name
    questions = ["How many people live in Paris?", "Is France a human?"]
    # Both in float32: the same weights then write the same text (a tiny random model's greedy choices can differ
    # between bfloat16 and float32).
    packed = Seq2SeqGenerator.load(tmp_path / "packed", max_new_tokens=6, precision="fp32")
    assert continued.generate(questions) == packed.generate(questions)
    resumed = train_seq2seq(examples[:12], examples[12:], out, replace(still, max_steps=2))
    assert resumed.resumed_from is not None and Path(resumed.resumed_from).name == "checkpoint-1"
    # With a learning rate the weights move away from the base.
    moved = train_seq2seq(
        examples[:12], examples[12:], tmp_path / "moved", replace(still, learning_rate=1e-2)
    )
    weights = Seq2SeqGenerator.load(moved.model_dir, precision="fp32").model.state_dict()
    assert any(not torch.equal(weights[n], base_state[n]) for n in weights if n.startswith("decoder."))


def test_decoder_embeddings_start_from_the_encoder_embeddings() -> None:
    """A target token's embedding is the mean of the encoder's WordPiece embeddings of the same text."""
    import torch

    from pgmr.generators.seq2seq.model import build_encoder_decoder, source_tokenizer_for
    from pgmr.generators.seq2seq.tokenizer import train_tokenizer

    source = source_tokenizer_for("minilm-tiny")
    target = train_tokenizer([e.target for e in build_examples(RECORDS, "pgmr")] * 3, vocab_size=320)
    model = build_encoder_decoder("minilm-tiny", source, target)
    words = {token: target.convert_tokens_to_string([token]).strip() for token in target.get_vocab()}
    checked = 0
    for token, text in words.items():
        if len(text) >= 4 and text.isalpha():
            ids = source(text, add_special_tokens=False)["input_ids"]
            expected = model.encoder.get_input_embeddings().weight[ids].mean(0)
            got = model.decoder.get_input_embeddings().weight[target.get_vocab()[token]]
            assert torch.allclose(got, expected), text
            checked += 1
    assert checked >= 5


def test_packed_model_generates_what_the_full_model_generates(trained, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """int8 packing (how the default model is committed) keeps the outputs; a broken pack is a clear error."""
    from pgmr.generators.seq2seq import Seq2SeqGenerator
    from pgmr.generators.seq2seq.packing import PACKING_FILE, PackingError, pack_model_dir

    _, out, _, _ = trained
    info = pack_model_dir(out / "model", tmp_path / "packed")
    assert info["quantized_parameters"] > 0 and not (tmp_path / "packed" / "model.safetensors").exists()
    questions = ["How many people live in Paris?", "Is France a human?"]
    full = Seq2SeqGenerator.load(out / "model", max_new_tokens=8).generate(questions)
    packed = Seq2SeqGenerator.load(tmp_path / "packed", max_new_tokens=8).generate(questions)
    assert packed == full
    packing = json.loads((tmp_path / "packed" / PACKING_FILE).read_text())
    packing["aliases"] = {"encoder.block.0.layer.0.SelfAttention.q.weight": "no.such.weight"}
    (tmp_path / "packed" / PACKING_FILE).write_text(json.dumps(packing))
    with pytest.raises(PackingError, match="missing"):
        Seq2SeqGenerator.load(tmp_path / "packed")


def test_retriever_embeds_each_ngram_once_across_calls(encoder) -> None:  # type: ignore[no-untyped-def]
    from pgmr.memory import Memory

    class Counting:
        """The real encoder, counting the texts it is asked to embed."""

        def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
            self.inner, self.texts = inner, 0

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(self.inner, name)

        def encode(self, texts, **kwargs):  # type: ignore[no-untyped-def]
            self.texts += len(texts)
            return self.inner.encode(texts, **kwargs)

    counting = Counting(encoder)
    memory = Memory.build_in_memory(CATALOG, counting)
    cached = CandidateRetriever(memory, k_entities=2, k_relations=2, chunk_size=2)
    uncached = CandidateRetriever(memory, k_entities=2, k_relations=2, chunk_size=2, cache_size=0)
    questions = [r.question for r in RECORDS[:6]]
    grams = {g for q in questions for g in question_ngrams(q)}
    counting.texts = 0
    first = cached.contexts(questions)
    assert counting.texts == len(grams)  # chunks of 2 questions share n-grams: each is embedded once
    assert cached.contexts(questions[::-1]) == first[::-1] and counting.texts == len(grams)
    assert uncached.contexts(questions) == first and counting.texts > 2 * len(grams)
    tiny = CandidateRetriever(memory, k_entities=2, k_relations=2, cache_size=3)
    assert tiny.contexts(questions) == first and len(tiny._hits) <= 3  # a full cache is emptied, not grown
