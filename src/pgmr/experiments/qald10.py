"""qald10: the LC-QuAD-trained models on QALD-10 test (transfer), with answers executed on a store; a pgmr
model fine-tuned on QALD-10's own 412 training questions (`--finetuned DIR`, its own row, as the paper trains
per dataset); and the chat-LLM backend (pgmr mode, resolved like the seq2seq pgmr model) when a server is given.

The default store is the small graph derived from QALD-10's gold answers (`default_kg_file`): it reproduces
the answers of 114 of the 394 questions and nothing else, so answer scores on it are a check that execution
works end to end, not a measure against Wikidata; point --store at a Wikidata endpoint for that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pgmr.experiments.common import (
    SYSTEMS_NOTE,
    ExperimentError,
    Workspace,
    carry_over,
    earlier_run,
    metrics_document,
    needs_memory,
    predict,
    report_header,
    run_system,
    score_system,
    system_notes,
    system_spec,
    systems_table,
    write_experiment,
)

NAME = "qald10"
TITLE = (
    "QALD-10 test: the LC-QuAD-trained models (transfer) and pgmr fine-tuned on QALD-10 train, answers executed "
    "on a store"
)
DATASET = "qald10-test"
CHAT = "chat-pgmr"
# The pgmr model fine-tuned on QALD-10's own training questions (the paper evaluates models trained per dataset).
FINETUNED = "pgmr-qald10-train"
FINETUNE_COMMAND = "scripts/finetune_qald10.sh"
ANSWER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("answer_precision", "answer P", "rate"),
    ("answer_recall", "answer R", "rate"),
    ("answer_f1", "answer F1", "rate"),
    ("answer_qald_f1", "QALD F1", "rate"),
)


@dataclass(frozen=True)
class ChatOptions:
    server: str | None = None
    model: str | None = None
    shots: str = "lcquad2-train"
    shots_limit: int | None = None
    k_shots: int = 5
    constrain: str = "auto"
    api_key: str | None = None
    timeout: float = 60.0

    @property
    def given(self) -> bool:
        return self.server is not None


def run(
    ws: Workspace,
    *,
    store: str | None = None,
    timeout: float = 30.0,
    chat: ChatOptions | None = None,
    finetuned: Path | None = None,
) -> dict[str, Any]:
    from pgmr.stores import StoreError, default_kg_file, open_store

    chat = chat or ChatOptions()
    if (chat.server is None) != (chat.model is None):
        raise ExperimentError("the chat-LLM row needs both --server URL and --server-model NAME")
    settings = ws.settings
    names = ["direct", "rag", "pgmr", *(["rag-pgmr"] if "rag-pgmr" in settings.models else [])]
    specs = [system_spec(name, settings.models.get(name)) for name in names]
    if finetuned is not None:
        specs.append(replace(system_spec("pgmr", finetuned), name=FINETUNED, make_command=FINETUNE_COMMAND))
    records = ws.load_test(DATASET)
    if not records:
        raise ExperimentError(f"{DATASET} has no records")
    earlier = earlier_run(ws, NAME, same={"dataset": DATASET, "questions": len(records)})
    catalog = ws.catalog
    if needs_memory(specs):
        ws.memory  # noqa: B018 (load it now: a missing memory fails before any generation)
    store_spec = store or str(default_kg_file(settings.data_dir))
    # Answer scores depend on the store: compare its file name or URL's last part, not the whole path, since
    # the same graph sits in another directory on another machine.
    before = ((earlier or {}).get("settings") or {}).get("store")
    if earlier is not None and Path(str(before)).name != Path(store_spec).name:
        raise ExperimentError(
            f"--keep-from: the earlier run executed answers on {before}, this run on {store_spec}; "
            "its answer scores would not be comparable"
        )
    try:
        sparql_store = open_store(store_spec, timeout=timeout)
    except (StoreError, OSError, ValueError) as exc:
        raise ExperimentError(f"cannot open the store {store_spec}: {exc}") from None
    systems: dict[str, dict[str, Any]] = {}
    try:
        for spec in specs:
            systems[spec.name] = run_system(
                ws,
                spec,
                records,
                experiment=NAME,
                dataset=DATASET,
                store=sparql_store,
                timeout=timeout,
                catalog=catalog,
            )
        if finetuned is None:
            systems[FINETUNED] = {
                "status": "not run",
                "note": f"no --finetuned model given (make one with `{FINETUNE_COMMAND}`)",
            }
        systems[CHAT] = _chat(ws, chat, records, sparql_store, timeout, catalog)
    finally:
        sparql_store.close()
    systems = carry_over(systems, earlier, reporter=ws.reporter)
    doc = metrics_document(
        ws,
        NAME,
        TITLE,
        settings={
            "dataset": DATASET,
            "questions": len(records),
            "store": store_spec,
            "store_timeout": timeout,
            "chat": {
                "server": chat.server,
                "model": chat.model,
                "shots": chat.shots,
                "k_shots": chat.k_shots,
                "shots_limit": chat.shots_limit,
                "constrain": chat.constrain,
            },
        },
        systems=systems,
    )
    from pgmr.experiments.plots import systems_bar_plot

    path = systems_bar_plot(
        systems, ws.out_dir / f"{NAME}.png", title=TITLE, paper=False, reporter=ws.reporter
    )
    doc["plots"] = [path.name] if path else []
    write_experiment(ws, doc, report(doc))
    return doc


def _chat(
    ws: Workspace, chat: ChatOptions, records: Any, store: Any, timeout: float, catalog: Any
) -> dict[str, Any]:
    if not chat.given:
        return {"status": "not run", "note": "no chat server given (pass --server URL --server-model NAME)"}
    try:
        from pgmr.generators.base import GeneratorError
        from pgmr.generators.chat.build import chat_generator_for_cli
    except ImportError as exc:
        ws.reporter.warn(f"chat-LLM backend unavailable ({exc}); its row is skipped")
        return {"status": "skipped", "note": f"chat-LLM backend unavailable: {exc}"}
    from pgmr.datasets import DatasetError

    try:
        generator = chat_generator_for_cli(
            chat.server,  # type: ignore[arg-type]
            "pgmr",
            ws.settings,  # the shots are read from its data_dir
            model=chat.model,
            shots=chat.shots,
            shots_limit=chat.shots_limit,
            k_shots=chat.k_shots,
            constrain=chat.constrain,
            grammar_field="grammar",
            api_key=chat.api_key,
            timeout=chat.timeout,
            temperature=0.0,
            max_tokens=ws.settings.max_new_tokens or 256,
        )
        rows, timings = predict(ws, generator, "pgmr", records, label=CHAT)
    except (ValueError, DatasetError, FileNotFoundError, GeneratorError) as exc:
        # A failing server costs its row, not the rows already computed.
        ws.reporter.warn(f"{CHAT}: {exc}")
        return {"status": "error", "note": str(exc), "server": chat.server, "model": chat.model}
    return score_system(
        ws,
        CHAT,
        rows,
        records,
        catalog=catalog,
        store=store,
        timeout=timeout,
        inputs={
            "experiment": NAME,
            "system": CHAT,
            "server": chat.server,
            "model": chat.model,
            "gold": DATASET,
        },
        title=f"{NAME}: {CHAT} ({chat.model}) on {DATASET}",
        model=f"{chat.model} at {chat.server}",
        mode="pgmr",
        **timings,
    )


def tables(doc: Mapping[str, Any]) -> str:
    systems = doc.get("systems", {})
    notes = system_notes(systems)
    return "\n".join(
        [
            systems_table(systems, paper=False, extra=ANSWER_COLUMNS),
            "",
            *([notes, ""] if notes else []),
            SYSTEMS_NOTE,
            "Answer P/R/F1: macro averages over the questions whose gold answers are known; `QALD F1` is the F "
            "of macro P and R, as QALD's scorer computes it. The paper's QALD-10 numbers are not transcribed here.",
        ]
    )


def report(doc: Mapping[str, Any]) -> str:
    settings = doc["settings"]
    parts = report_header(doc)
    parts += [
        f"{settings['questions']} questions of {DATASET}; answers executed on `{settings['store']}` "
        f"({settings['store_timeout']} s per query).",
        "",
        tables(doc),
        "",
        "With the default store (a graph of QALD-10's own gold answers, 196 triples) only questions whose "
        "answers it holds can score; it checks execution end to end, it is not Wikidata.",
        "",
    ]
    for plot in doc.get("plots", []):
        parts += [f"![{NAME}]({plot})", ""]
    return "\n".join(parts)
