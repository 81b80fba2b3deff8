"""End to end with what ships: the default generator (models/pgmr-default), a memory built from the real
catalog, the small QALD-10 answer graph. Questions whose gold answers that graph holds come back with those
answers; a question about nothing in memory is refused with its reason.

The memory holds every ID of the QALD-10 gold queries plus 1,500 other entities and 500 other properties (so
the resolver has to choose), not the full 95k-entry memory, which takes ~13 minutes to build on 2 cores.
Which QALD questions the shipped model gets right is a property of that model (5 of the 124 the graph can
answer, docs/ask-and-serve.md); these are among them.
"""

from __future__ import annotations

import random
import re

import pytest

from pgmr.config import resolve_data_dir
from pgmr.generators import ModelNotFoundError, default_model_dir

DATA_DIR = resolve_data_dir(None)
pytestmark = pytest.mark.slow
if not (DATA_DIR / "kg").is_dir():
    pytest.skip("no ../shared/data", allow_module_level=True)

# (QALD-10 id, the gold answer the small graph returns for it)
ANSWERED = {"281": "Q203942", "354": "Q298761"}


@pytest.fixture(scope="module")
def pipeline(encoder, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from pgmr.datasets import load_named
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.memory import Memory
    from pgmr.pipeline import Pipeline, PipelineConfig
    from pgmr.stores import default_kg_file

    try:
        default_model_dir()
    except ModelNotFoundError as exc:
        pytest.fail(str(exc))
    catalog = LabelCatalog.from_data_dir(DATA_DIR)
    gold_ids = set()
    for record in load_named("qald10-test", DATA_DIR).records:
        gold_ids.update(re.findall(r"\b[QP]\d+\b", record.sparql))
    rng = random.Random(0)
    entities = sorted(i for i in catalog.ids() if i.startswith("Q"))
    properties = sorted(i for i in catalog.ids() if i.startswith("P"))
    keep = gold_ids | set(rng.sample(entities, 1500)) | set(rng.sample(properties, 500))
    memory_dir = tmp_path_factory.mktemp("qald-memory") / "memory"
    Memory.build(catalog, memory_dir, encoder, ids=keep & catalog.ids(), progress=False, use_cache=False)
    config = PipelineConfig(
        memory_dir=memory_dir, store=str(default_kg_file(DATA_DIR)), data_dir=DATA_DIR, verify_memory=False
    )
    pipe = Pipeline.load(config)
    yield pipe
    pipe.close()


def _question(qald_id: str) -> str:
    from pgmr.datasets import load_named

    return next(r.question for r in load_named("qald10-test", DATA_DIR).records if str(r.id) == qald_id)


@pytest.mark.parametrize("qald_id", sorted(ANSWERED))
def test_the_default_model_answers_qald_questions_the_graph_holds(pipeline, qald_id: str) -> None:  # type: ignore[no-untyped-def]
    result = pipeline.ask(_question(qald_id))
    assert result.status == "answered", result.to_json()
    assert ANSWERED[qald_id] in {a.id for a in result.answers}
    assert (
        result.sparql and "wd:" + ANSWERED[qald_id] not in result.sparql
    )  # the answer is found, not written


def test_a_question_about_nothing_in_memory_is_refused_with_its_reason(pipeline) -> None:  # type: ignore[no-untyped-def]
    # The default configuration: refusal is on at the shipped threshold, nothing set here.
    result = pipeline.ask("Who is the mayor of Zorblaxopolis on Quuxia Prime?")
    assert result.status == "refused", result.to_json()
    assert result.reason and "entity" in result.reason and result.unsupported
    assert "rejected: confidence" in result.reason  # the reason says why the best candidate was rejected
    for name in result.unsupported:
        placeholder = next(p for p in result.placeholders if p.name == name)
        assert placeholder.confidence is not None and placeholder.confidence < placeholder.min_confidence


def test_pgmr_ask_cli_returns_the_gold_answer(pipeline) -> None:  # type: ignore[no-untyped-def]
    """The same through the command a user types (`pgmr ask --json`), default model and default store."""
    import json

    from typer.testing import CliRunner

    from pgmr.cli.main import app

    result = CliRunner().invoke(
        app,
        [
            "--data-dir",
            str(DATA_DIR),
            "ask",
            _question("354"),
            "--memory",
            str(pipeline.config.memory_dir),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["status"] == "answered"
    assert "Q298761" in {a.get("id") for a in answer["answers"]}
