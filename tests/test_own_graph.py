"""PGMR over a graph of one's own (docs/own-graph.md): a small Turtle graph with its own namespaces, written here,
read into a catalog, a real memory (MiniLM, FAISS) built from it, gold SPARQL converted to SPARQL-PGMR and
resolved back, and the final query run on a real pyoxigraph store; the CLI on the same graph, bad input; and
the oracle condition on the real CK25 graph (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.conversion import ConversionError, convert_sparql, fill
from pgmr.evaluation.ordered import ordered_answer_scores
from pgmr.kg.catalog import CatalogEntry, CatalogError, LabelCatalog
from pgmr.kg.graph import GraphCatalog, GraphSettings
from pgmr.kg.iris import generated_prefixes, namespace_of, write_iri
from pgmr.kg.rdf import read_rdf_files
from pgmr.memory import Memory
from pgmr.pipeline import Pipeline, PipelineConfig
from pgmr.stores import OxigraphStore

runner = CliRunner()

VOCAB = "http://example.org/zoo/vocab#"
ZOO = "http://example.org/zoo/id/"
ZOO_TTL = """\
@prefix zoo: <http://example.org/zoo/vocab#> .
@prefix z: <http://example.org/zoo/id/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .

zoo:Animal a owl:Class ; rdfs:label "Animal"@en, "Tier"@de ; rdfs:comment "A living creature kept in the zoo."@en .
zoo:Keeper a owl:Class ; rdfs:label "Keeper"@en ; rdfs:comment "A person who looks after animals."@en .
zoo:Enclosure a owl:Class ; rdfs:label "Enclosure"@en .
zoo:caredForBy a owl:ObjectProperty ; rdfs:label "cared for by"@en ;
    rdfs:comment "The keeper responsible for an animal."@en ; rdfs:domain zoo:Animal ; rdfs:range zoo:Keeper .
zoo:livesIn rdfs:label "lives in"@en ; rdfs:comment "The enclosure an animal lives in."@en .
zoo:weightKg a owl:DatatypeProperty ; rdfs:label "weight (kg)"@en .

z:leo a zoo:Animal ; skos:prefLabel "Leo"@en ; rdfs:label "Leo the lion" ; skos:altLabel "King of the zoo"@en ;
    zoo:caredForBy z:ana ; zoo:livesIn z:savanna ; zoo:weightKg 190 .
z:nala a zoo:Animal ; rdfs:label "Nala" ; zoo:caredForBy z:ana ; zoo:livesIn z:savanna ; zoo:weightKg 126 .
z:pingu a zoo:Animal ; rdfs:label "Pingu"@de-ch, "Pingu"@en ; zoo:caredForBy z:ben ; zoo:livesIn z:ice .
z:ana a zoo:Keeper ; rdfs:label "Ana Lima" .
z:ben a zoo:Keeper ; rdfs:label "Ben Okafor" ; rdfs:comment "Head keeper of the polar house."@en .
z:savanna a zoo:Enclosure ; rdfs:label "Savanna"@en .
z:ice a zoo:Enclosure ; rdfs:label "Ice House"@en .
z:shed-7 zoo:livesIn z:ice .
"""
QUESTION = "Which animals does Ana Lima care for?"
GOLD = """PREFIX zoo: <http://example.org/zoo/vocab#>
PREFIX z: <http://example.org/zoo/id/>
SELECT ?animal WHERE { ?animal zoo:caredForBy z:ana . ?animal a zoo:Animal . }"""


@pytest.fixture(scope="module")
def zoo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graph") / "zoo.ttl"
    path.write_text(ZOO_TTL, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def catalog(zoo_file: Path) -> GraphCatalog:
    return read_rdf_files([zoo_file])


@pytest.fixture(scope="module")
def zoo_memory(catalog: GraphCatalog, encoder: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("memory") / "zoo"
    Memory.build(catalog, path, encoder)  # type: ignore[arg-type]
    return path


# -- the catalog ---------------------------------------------------------------------------------------------


def test_every_labelled_iri_is_an_entry_with_its_kind(catalog: GraphCatalog) -> None:
    assert catalog.counts() == {"class": 3, "property": 3, "instance": 7}
    assert catalog.get(ZOO + "shed-7") is None  # no label: no entry
    assert catalog.get(VOCAB + "livesIn").graph_kind == "property"  # only by its use as a predicate
    assert (
        catalog.get(VOCAB + "Animal").kind == "entity"
        and catalog.get(VOCAB + "caredForBy").kind == "relation"
    )
    assert {"zoo": VOCAB, "z": ZOO}.items() <= catalog.prefixes.items()  # the file's @prefix lines


def test_labels_by_predicate_and_language_descriptions_from_classes(catalog: GraphCatalog) -> None:
    leo = catalog.get(ZOO + "leo")
    assert leo == CatalogEntry(ZOO + "leo", "Leo", "Animal", ("King of the zoo", "Leo the lion"), "instance")
    assert catalog.get(ZOO + "ben").description == "Head keeper of the polar house."  # its own comes first
    assert catalog.get(VOCAB + "Animal").label == "Animal"
    assert catalog.get(VOCAB + "Animal").description == "A living creature kept in the zoo."


def test_language_preference_is_a_setting(zoo_file: Path) -> None:
    german = read_rdf_files([zoo_file], GraphSettings(languages=("de", "en")))
    assert german.get(VOCAB + "Animal").label == "Tier"
    assert german.get(ZOO + "pingu").label == "Pingu"  # "de" takes de-ch
    with pytest.raises(ValueError, match="absolute IRI"):
        GraphSettings().with_extra(labels=["name"])


def test_prefixes_are_generated_where_a_graph_declares_none() -> None:
    made = generated_prefixes(
        ["http://ld.company.org/prod-vocab/", "http://www.w3.org/2000/01/rdf-schema#"], {}
    )
    assert made == {
        "prodvocab": "http://ld.company.org/prod-vocab/",
        "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    }
    assert generated_prefixes(["http://x.org/p/"], {"p": "http://other.org/"}) == {"p2": "http://x.org/p/"}
    assert namespace_of("http://ld.company.org/prod-vocab/") == "http://ld.company.org/"
    assert write_iri(ZOO + "shed-7", {"z": ZOO}) == "z:shed-7"
    assert write_iri(ZOO + "a%40b", {"z": ZOO}) == f"<{ZOO}a%40b>"  # not a local name the lexer reads whole


def test_a_broken_file_is_an_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ttl"
    bad.write_text(ZOO_TTL + 'z:x rdfs:label "never closed .\n', encoding="utf-8")
    with pytest.raises(CatalogError, match=r"bad.ttl is not valid Turtle: .*line \d+"):
        read_rdf_files([bad])
    unknown = tmp_path / "zoo.txt"
    unknown.write_text(ZOO_TTL, encoding="utf-8")
    with pytest.raises(CatalogError, match="unknown RDF format"):
        read_rdf_files([unknown])


# -- conversion and back ---------------------------------------------------------------------------------------


def test_gold_query_converts_with_the_graph_labels_and_fills_back(catalog: GraphCatalog) -> None:
    query, mapping = convert_sparql(GOLD, catalog)
    assert query.to_text() == (
        "SELECT ?animal WHERE { ?animal wdt:relation0 wd:entity0 . ?animal a wd:entity1 . }\n"
        "relation0 = [REL] cared for by [/REL] The keeper responsible for an animal.\n"
        "entity0 = [ENT] Ana Lima [/ENT] Keeper\n"
        "entity1 = [ENT] Animal [/ENT] A living creature kept in the zoo."
    )
    assert mapping == {"relation0": VOCAB + "caredForBy", "entity0": ZOO + "ana", "entity1": VOCAB + "Animal"}
    filled = fill(query, mapping, namespaces=catalog.prefixes)
    assert filled.splitlines()[:2] == [f"PREFIX z: <{ZOO}>", f"PREFIX zoo: <{VOCAB}>"]
    assert "?animal zoo:caredForBy z:ana . ?animal a zoo:Animal ." in filled
    # Without the graph's prefixes an IRI is written in full; Wikidata IDs fill as they always did.
    assert f"<{ZOO}ana>" in fill(query, mapping)
    assert fill("SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }", {"entity0": "Q1", "relation0": "P2"}) == (
        "PREFIX wd: <http://www.wikidata.org/entity/>\nPREFIX wdt: <http://www.wikidata.org/prop/direct/>\n"
        "SELECT ?x WHERE { wd:Q1 wdt:P2 ?x }"
    )


def test_unlabelled_iris_of_the_graph_skip_and_vocabulary_stays(catalog: GraphCatalog) -> None:
    with pytest.raises(ConversionError) as caught:
        convert_sparql(f"SELECT ?x WHERE {{ <{ZOO}shed-7> <{VOCAB}livesIn> ?x }}", catalog)
    assert caught.value.reason == "missing_label"
    query, _ = convert_sparql(
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
        f'SELECT ?c WHERE {{ ?c rdfs:subClassOf* <{VOCAB}Animal> . ?x <{VOCAB}weightKg> "190"^^<http://www.w3.org/2001/XMLSchema#integer> }}',
        catalog,
    )
    assert query.skeleton.startswith("SELECT ?c WHERE { ?c rdfs:subClassOf* wd:entity0 . ?x wdt:relation0 ")
    assert '"190"^^<http://www.w3.org/2001/XMLSchema#integer>' in query.skeleton


# -- the memory, resolution, execution -------------------------------------------------------------------------


def test_memory_keeps_the_graph_and_loads_like_any_other(zoo_memory: Path, catalog: GraphCatalog) -> None:
    memory = Memory.load(zoo_memory)
    manifest = json.loads((zoo_memory / "manifest.json").read_text())
    assert manifest["graph"]["file"] == "graph.json" and memory.graph is not None
    assert memory.graph.prefix_map() == catalog.prefixes
    assert ZOO + "ana" in memory and VOCAB + "caredForBy" in memory and ZOO + "shed-7" not in memory
    assert len(memory.entities) == 10 and len(memory.relations) == 3
    hit = memory.entities.search(["Ana Lima"], k=1)[0][0]
    assert (hit.id, hit.description) == (ZOO + "ana", "Keeper")


def test_a_wikidata_memory_has_no_graph_entry(encoder: object, tmp_path: Path) -> None:
    Memory.build(LabelCatalog([CatalogEntry("Q64", "Berlin", "capital of Germany")]), tmp_path / "m", encoder)  # type: ignore[arg-type]
    assert "graph" not in json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert Memory.load(tmp_path / "m").graph is None


def _pipeline(zoo_memory: Path) -> Pipeline:
    return Pipeline(None, Memory.load(zoo_memory), config=PipelineConfig(kg_check=False))


def test_resolved_back_and_executed_gives_the_gold_answers(
    zoo_memory: Path, zoo_file: Path, catalog: GraphCatalog
) -> None:
    query, mapping = convert_sparql(GOLD, catalog)
    result = _pipeline(zoo_memory).resolve_text(query.to_text(), question=QUESTION, execute=False)
    assert result.status == "resolved", result.reason
    assert dict(result.mapping) == mapping
    assert "?animal zoo:caredForBy z:ana . ?animal a zoo:Animal ." in (result.sparql or "")
    with OxigraphStore.from_file(zoo_file) as store:
        answers = {row["animal"].value for row in store.query(result.sparql or "").rows}
        gold = {row["animal"].value for row in store.query(GOLD).rows}
    assert answers == gold == {ZOO + "leo", ZOO + "nala"}


def test_refusal_and_raw_iris_as_for_wikidata(zoo_memory: Path) -> None:
    pipeline = _pipeline(zoo_memory)
    unknown = pipeline.resolve_text(
        "SELECT ?a WHERE { ?a wdt:relation0 wd:entity0 }\n"
        "relation0 = [REL] cared for by [/REL]\nentity0 = [ENT] Carl Gustav [/ENT] Keeper",
        question="Which animals does Carl Gustav care for?",
        execute=False,
    )
    assert unknown.status == "refused" and "entity0 'Carl Gustav'" in (unknown.reason or "")
    raw = pipeline.resolve_text(
        f"SELECT ?a WHERE {{ ?a <{VOCAB}caredForBy> wd:entity0 }}\nentity0 = [ENT] Ana Lima [/ENT] Keeper",
        execute=False,
    )
    assert raw.status == "invalid" and "use a placeholder" in (raw.reason or "")


def test_ordered_scores_follow_the_ranking() -> None:
    assert ordered_answer_scores(["a", "b", "c"], ["a", "b", "c"]).f1 == 1.0
    assert ordered_answer_scores(["c", "b", "a"], ["a", "b", "c"]).f1 == pytest.approx(1 / 3)


# -- the CLI -----------------------------------------------------------------------------------------------------


def test_cli_builds_converts_and_resolves(zoo_file: Path, tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    built = runner.invoke(app, ["memory", "build", "--from-rdf", str(zoo_file), "-o", str(memory)])
    assert built.exit_code == 0, built.output
    assert "13 labelled IRIs (3 classes, 3 properties, 7 instances)" in " ".join(built.output.split())
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "zoo-1", "question": QUESTION, "sparql": GOLD}) + "\n")
    converted = runner.invoke(
        app, ["convert", str(questions), "--memory", str(memory), "-o", str(tmp_path / "c.jsonl")]
    )
    assert converted.exit_code == 0, converted.output
    resolved = runner.invoke(
        app, ["resolve", str(tmp_path / "c.jsonl"), "-m", str(memory), "-o", str(tmp_path / "r.jsonl")]
    )
    assert resolved.exit_code == 0, resolved.output
    row = json.loads((tmp_path / "r.jsonl").read_text())
    assert row["status"] == "resolved" and "zoo:caredForBy z:ana" in row["sparql"]


def test_cli_refuses_a_broken_file_and_writes_nothing(zoo_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "broken.ttl"
    bad.write_text(ZOO_TTL + "z:x zoo:livesIn <http://example.org/never closed .\n", encoding="utf-8")
    result = runner.invoke(
        app,
        ["memory", "build", "--from-rdf", str(zoo_file), "--from-rdf", str(bad), "-o", str(tmp_path / "m")],
    )
    said = " ".join(result.output.split())
    assert result.exit_code == 2
    assert "broken.ttl is not valid Turtle: Parser error between line 24" in said
    assert said.endswith("Unexpected end of file; no memory was written")
    assert not (tmp_path / "m").exists()
    both = runner.invoke(
        app, ["memory", "build", "--from-rdf", str(zoo_file), "--from-endpoint", "http://127.0.0.1:9/q"]
    )
    assert both.exit_code == 2 and "give one of" in both.output


# -- CK25: the oracle on a real graph ------------------------------------------------------------------------------


@pytest.mark.slow
def test_ck25_oracle_resolves_the_gold_iris_and_invents_none(tmp_path: Path) -> None:
    from dataclasses import replace

    from pgmr.config import resolve_data_dir
    from pgmr.experiments.ck25 import DEFAULT_GRAPH, DEFAULT_QUESTIONS, Ck25Settings, run
    from pgmr.experiments.settings import ExperimentError
    from pgmr.resolver.support import shipped_threshold

    data = resolve_data_dir(None)
    if not (data / DEFAULT_GRAPH).is_file():
        pytest.skip(f"no CK25 data under {data}")
    # An earlier chat run (its one system at the top level, as runs wrote before `systems`) kept beside it.
    earlier = tmp_path / "ck25-chat"
    earlier.mkdir()
    chat = {
        "experiment": "ck25",
        "condition": "chat",
        "questions_file": str(data / DEFAULT_QUESTIONS),
        "graph_file": str(data / DEFAULT_GRAPH),
        "model": "qwen2.5-coder-1.5b.gguf",
        "generator": {"examples": 6},
        "command": "pgmr experiment ck25 --server URL",
        "started_at": "2026-12-07T06:16:00+00:00",
        "metrics": {
            "questions": 25,
            "statuses": {"resolved": 20, "refused": 3, "invalid": 2},
            "gold_iris": 96,
            "gold_iris_right": 44,
            "iri_accuracy": 0.4583,
            "invented_iris": 0,
            "execution_errors": 0,
            "query_em": 0.0,
            "answer_precision": 0.96,
            "answer_recall": 0.04,
            "answer_f1": 0.04,
            "answer_set_f1": 0.04,
        },
    }
    (earlier / "metrics.json").write_text(json.dumps(chat), encoding="utf-8")
    settings = Ck25Settings(
        questions=data / DEFAULT_QUESTIONS,
        graph=data / DEFAULT_GRAPH,
        out_dir=tmp_path / "ck25",
        min_confidence=shipped_threshold(),
        keep_from=(earlier,),
    )
    doc = run(settings)
    metrics = doc["metrics"]
    assert doc["system"] == "oracle" and list(doc["systems"]) == ["oracle", "chat-qwen2.5-coder-1.5b"]
    assert doc["systems"]["oracle"]["metrics"] == metrics and doc["settings"]["questions"] == 25
    kept = doc["systems"]["chat-qwen2.5-coder-1.5b"]
    assert kept["carried_from"]["started_at"] == "2026-12-07T06:16:00+00:00"
    assert kept["metrics"]["answer_set_f1"] == 0.04
    assert metrics["questions"] == 25
    assert metrics["iri_accuracy"] >= 0.95
    assert metrics["invented_iris"] == 0
    assert metrics["answer_f1"] >= metrics["gold_query_answer_f1"] - 0.05
    assert {"metrics.json", "predictions.jsonl", "report.md"} <= {
        p.name for p in (tmp_path / "ck25").iterdir()
    }
    report = (tmp_path / "ck25" / "report.md").read_text(encoding="utf-8")
    assert (
        "| pgmr + Qwen2.5-Coder-1.5B-Instruct (schema prompt, no training pairs) | run 2026-12-07 06:16 |"
        in report
    )
    assert "TEXT2SPARQL'25 best published on CK25" in report

    # A run on other questions (here: the first 5) cannot be kept beside these; nothing is written.
    with pytest.raises(ExperimentError, match="would not be comparable"):
        run(replace(settings, out_dir=tmp_path / "five", limit=5))
    assert not (tmp_path / "five").exists()


ZOO_PAIRS = [
    ("Which animals does Ana Lima care for?", "?a zoo:caredForBy z:ana"),
    ("Which animals does Ben Okafor look after?", "?a zoo:caredForBy z:ben"),
    ("Who lives in the Savanna?", "?a zoo:livesIn z:savanna"),
    ("Which animals live in the Ice House?", "?a zoo:livesIn z:ice"),
    ("Who cares for Leo?", "z:leo zoo:caredForBy ?a"),
    ("Who looks after Nala?", "z:nala zoo:caredForBy ?a"),
    ("Where does Pingu live?", "z:pingu zoo:livesIn ?a"),
    ("In which enclosure is Nala?", "z:nala zoo:livesIn ?a"),
]


def test_training_on_your_own_pairs_and_evaluating_the_model(zoo_file: Path, tmp_path: Path) -> None:
    """`pgmr train --graph MEMORY` converts pairs over the graph with its labels and trains (a tiny model, a
    few steps: the plumbing, not its quality); `pgmr experiment ck25 --model` runs it over the same graph."""
    memory = tmp_path / "mem"
    assert runner.invoke(app, ["memory", "build", "--from-rdf", str(zoo_file), "-o", str(memory)]).exit_code == 0
    pairs = tmp_path / "pairs.jsonl"
    prefixes = f"PREFIX zoo: <{VOCAB}> PREFIX z: <{ZOO}> "
    pairs.write_text(
        "".join(
            json.dumps({"id": f"zoo-{i}", "question": q, "sparql": f"{prefixes}SELECT ?a WHERE {{ {t} . }}", "answers": []})
            + "\n"
            for i, (q, t) in enumerate(ZOO_PAIRS)
        )
    )
    run = tmp_path / "run"
    args = ["train", "--mode", "pgmr", "--preset", "minilm-tiny", "--train", str(pairs), "--graph", str(memory)]
    args += ["-o", str(run), "--max-steps", "2", "--eval-steps", "2", "--validation-share", "0.3", "--no-progress"]
    trained = runner.invoke(app, args)
    assert trained.exit_code == 0, trained.output
    card = json.loads((run / "model" / "model_card.json").read_text())
    assert card["data"]["graph"] == str(memory) and card["data"]["converted"] == len(ZOO_PAIRS)
    out = tmp_path / "eval"
    evaluated = runner.invoke(
        app,
        ["experiment", "ck25", "--model", str(run / "model"), "--memory", str(memory), "--graph", str(zoo_file),
         "--questions", str(pairs), "-o", str(out), "--no-refusal"],
    )
    assert evaluated.exit_code == 0, evaluated.output
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == len(ZOO_PAIRS)
    missing = runner.invoke(app, [*args[:8], str(tmp_path / "no-memory"), *args[9:]])
    assert missing.exit_code == 2
