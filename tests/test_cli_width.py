"""Tables at the terminal's width: at 80 columns no line is longer, no header or word is cut, the least
important columns go first; `--wide` shows every column (`pgmr demo` is checked in test_cli.py)."""

from __future__ import annotations

import io
import json

from rich.console import Console
from typer.testing import CliRunner

from pgmr.cli.ask import CANDIDATE_COLUMNS
from pgmr.cli.main import app
from pgmr.cli.tables import FittedTable, row
from test_pipeline import PARIS, Parts

runner = CliRunner()

INTEL = (
    ("✓", "Q248", "Intel", "American multinational technology corporation", "1.042", "1.000"),
    (
        "",
        "Q4652597",
        "Advanced Micro Devices, Inc. v. Intel Corp.",
        "legal case in the United States",
        "0.753",
        "0.751",
    ),
    (
        "",
        "Q15147971",
        "Intel Corp. v. Advanced Micro Devices, Inc.",
        "2004 United States Supreme Court case",
        "0.673",
        "0.671",
    ),
)


def _render(table: FittedTable, width: int) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width).print(table, crop=not table.wide)
    return buffer.getvalue()


def _headers(text: str) -> list[str]:
    header = next(line for line in text.splitlines() if line.startswith("┃"))
    return [cell.strip() for cell in header.strip("┃").split("┃")]


def _words(text: str) -> set[str]:
    return {word for line in text.splitlines() for cell in line.split("│") for word in cell.split()}


def test_candidate_columns_go_least_important_first_and_words_stay_whole() -> None:
    table = FittedTable(CANDIDATE_COLUMNS, tuple(row(*cells) for cells in INTEL))
    headers = {}
    for width in (80, 60):
        text = _render(table, width)
        assert max(map(len, text.splitlines())) <= width and "…" not in text
        # Every word of every label and description is on one line, whole.
        assert {w for cells in INTEL for cell in cells[1:4] for w in cell.split()} <= _words(text)
        headers[width] = _headers(text)
    assert headers[80] == ["", "id", "label", "description", "score"]
    assert headers[60] == ["", "id", "label", "description"]
    wide = _render(FittedTable(CANDIDATE_COLUMNS, table.rows, wide=True), 60)
    assert _headers(wide) == ["", "id", "label", "description", "score", "similarity"]
    assert max(map(len, wide.splitlines())) > 60  # wider than the terminal, on purpose


def test_ask_fits_80_columns_and_wide_shows_every_column(parts: Parts) -> None:
    args = [
        "--data-dir",
        str(parts.data_dir),
        "ask",
        "--model",
        str(parts.model_dir),
        "--memory",
        str(parts.memory_dir),
        PARIS,
        "--threshold",
        "0.8",
    ]
    narrow = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    lines = narrow.output.splitlines()
    assert max(map(len, lines)) <= 80, "\n".join(line for line in lines if len(line) > 80)
    assert "…" not in narrow.output
    chosen = [line for line in lines if "✓" in line]
    assert any("Q90" in line and "Paris" in line for line in chosen), chosen
    assert any("P1376" in line and "capital of" in line for line in chosen), chosen
    assert "France" in narrow.stdout and "status: answered" in narrow.stdout
    assert "similarity" not in narrow.stdout  # the first column to go

    wide = runner.invoke(app, [*args, "--wide"], env={"COLUMNS": "80"})
    assert wide.exit_code == 0, wide.output
    headers = {h for line in wide.stdout.splitlines() if line.startswith("┃") for h in _headers(line)}
    assert {"id", "label", "description", "score", "similarity", "variable", "answer", "mapping"} <= headers
    assert "…" not in wide.stdout

    # --json is the same whatever the width or --wide.
    as_json = runner.invoke(app, [*args, "--json"], env={"COLUMNS": "80"})
    wide_json = runner.invoke(app, [*args, "--json", "--wide"], env={"COLUMNS": "200"})
    assert _untimed(as_json.stdout) == _untimed(wide_json.stdout)


def _untimed(stdout: str) -> dict:
    """A JSON result without its timings, the one part two runs never share."""
    payload = json.loads(stdout)
    del payload["timings"]
    for probe in payload["probes"]:
        del probe["seconds"]
    return payload
