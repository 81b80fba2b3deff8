"""What the experiments share, gathered in one place to import from: settings (`settings`), the compared
systems (`systems`), the workspace and sub-memories (`workspace`), prediction rows through the pipeline's
stages (`predict`), scoring and results kept from earlier runs (`scoring`), the documents every experiment
writes (`documents`) and progress reports (`reporting`).

An experiment module exposes `NAME`, `TITLE`, `run(workspace, ...) -> dict` (its metrics document, also
written to metrics.json) and `tables(doc) -> str` (markdown tables of a metrics document, reused by
`pgmr experiment results-doc`).
"""

from __future__ import annotations

from pgmr.experiments.documents import (
    PAPER_COUNTERPART,
    PAPER_TABLE1,
    SYSTEM_COLUMNS,
    SYSTEMS_NOTE,
    fmt_decoding,
    fmt_seconds,
    md_table,
    metrics_document,
    millions,
    num,
    pct,
    report_header,
    run_label,
    system_notes,
    systems_table,
    write_experiment,
    write_rows,
)
from pgmr.experiments.outputs import load_drafts, load_predictions, pgmr_drafts, pgmr_outputs
from pgmr.experiments.predict import (
    RESOLVE_CHUNK,
    answer_outputs,
    base_rows,
    generate_draft_lists,
    gold_entities,
    min_entity_similarity,
    parse_outputs,
    parses,
    predict,
    prediction_rows,
    rag_contexts,
    resolution_fields,
    resolve_parsed,
    verdicts,
)
from pgmr.experiments.reporting import QUIET, Advance, Quiet, Reporter
from pgmr.experiments.scoring import (
    carry_over,
    earlier_run,
    run_system,
    score,
    score_system,
    system_result,
    write_system,
)
from pgmr.experiments.settings import (
    DEFAULT_MODELS,
    ExperimentError,
    ExperimentSettings,
    parse_models,
    train_command,
)
from pgmr.experiments.systems import SystemSpec, decoding_info, load_generator, needs_memory, system_spec
from pgmr.experiments.workspace import Workspace, shared_encoder, sub_memory

__all__ = [
    "DEFAULT_MODELS",
    "PAPER_COUNTERPART",
    "PAPER_TABLE1",
    "QUIET",
    "RESOLVE_CHUNK",
    "SYSTEMS_NOTE",
    "SYSTEM_COLUMNS",
    "Advance",
    "ExperimentError",
    "ExperimentSettings",
    "Quiet",
    "Reporter",
    "SystemSpec",
    "Workspace",
    "answer_outputs",
    "base_rows",
    "carry_over",
    "decoding_info",
    "earlier_run",
    "fmt_decoding",
    "fmt_seconds",
    "generate_draft_lists",
    "gold_entities",
    "load_generator",
    "load_drafts",
    "load_predictions",
    "md_table",
    "metrics_document",
    "millions",
    "min_entity_similarity",
    "needs_memory",
    "num",
    "parse_models",
    "parse_outputs",
    "parses",
    "pct",
    "pgmr_drafts",
    "pgmr_outputs",
    "predict",
    "prediction_rows",
    "rag_contexts",
    "report_header",
    "resolution_fields",
    "resolve_parsed",
    "run_label",
    "run_system",
    "score",
    "score_system",
    "shared_encoder",
    "sub_memory",
    "system_notes",
    "system_result",
    "system_spec",
    "systems_table",
    "train_command",
    "verdicts",
    "write_experiment",
    "write_rows",
    "write_system",
]
