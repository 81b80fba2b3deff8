"""The scores of `pgmr experiment ck25` (pgmr.experiments.ck25): per question, then summed up, and the files.

Per question:
- `gold_iris`: the IRIs of the gold query that belong to the graph (its catalog names them, or they lie in a
  namespace that holds its entries); `right_iris`: those the final query names too. Other IRIs of the gold
  (`rdf:type`, `rdfs:subClassOf`, a value of another dataset such as a DBpedia country) are written by the
  generator as they are and listed as `verbatim`, not scored;
- `invented`: IRIs of the final query that the graph does not hold, anywhere (the claim is 0);
- `query_em`: the final query against the gold (pgmr.evaluation.metrics.query_exact_match);
- answers: the final query's values on the store against the gold `answers` (set P/R/F1 with QALD's rules
  for empty sides); for a question whose answer order matters, the order-aware score of
  pgmr.evaluation.ordered against the gold query's own ranking on the store (F1 and the set F1 both kept).
A question without a final query (refused, invalid, or a gold query that does not convert) scores as an empty
answer: P 1, R 0, F1 0 when the gold has answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.conversion.graph import query_iris
from pgmr.evaluation.answers import AnswerScores, answer_scores, normalize_answer
from pgmr.evaluation.metrics import query_exact_match
from pgmr.evaluation.ordered import ordered_answer_scores, ranked_values
from pgmr.experiments.ck25_systems import ordered, system_label, systems_of
from pgmr.experiments.documents import md_table, run_label
from pgmr.jsonl import atomic_write_text, write_json, write_jsonl
from pgmr.kg.iris import namespace_of

if TYPE_CHECKING:
    from pgmr.experiments.ck25_questions import GraphQuestion
    from pgmr.kg.graph import GraphCatalog
    from pgmr.pipeline import AskResult


def _run(store: Any, sparql: str, timeout: float) -> tuple[list[list[str]] | None, str | None]:
    """The rows' values (variable order) of a query on the store, or the error."""
    from pgmr.stores import StoreError

    try:
        result = store.query(sparql, timeout=timeout)
    except StoreError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if result.kind == "boolean":
        return [["true" if result.boolean else "false"]], None
    return [[row[v].value for v in result.variables if v in row] for row in result.rows], None


def score_question(
    q: GraphQuestion,
    result: AskResult | None,
    intermediate: tuple[str, dict[str, str]] | None,
    skipped: str | None,
    store: Any,
    catalog: GraphCatalog,
    graph_iris: frozenset[str],
    timeout: float,
) -> dict[str, Any]:
    namespaces = catalog.namespaces()
    named = list(dict.fromkeys(query_iris(q.sparql)))
    gold = [i for i in named if i in catalog or namespace_of(i) in namespaces]
    status = "unconverted" if result is None else result.status
    final = result.sparql if result is not None and status == "resolved" else None
    predicted = set(query_iris(final)) if final else set()
    rows, error = _run(store, final, timeout) if final else (None, None)
    values = ranked_values(rows or [])
    scores = answer_scores(values, {normalize_answer(a) for a in q.answers})
    row: dict[str, Any] = {
        "id": q.id,
        "question": q.question,
        "status": status,
        "reason": skipped if result is None else result.reason,
        "gold_intermediate": intermediate[0] if intermediate else None,
        "generated": result.intermediate if result is not None else None,
        "grounded": [list(g) for g in result.grounded] if result is not None else [],
        "sparql": final,
        "gold_sparql": q.sparql,
        "gold_iris": gold,
        "right_iris": [i for i in gold if i in predicted],
        "verbatim_iris": [i for i in named if i not in gold],
        "invented_iris": sorted(i for i in predicted if i not in graph_iris),
        "query_em": query_exact_match(final, q.sparql),
        "order_matters": q.order_matters,
        "set_f1": scores.f1,
        "n_predicted": len(values),
        "n_gold": len(q.answers),
        "error": error,
    }
    # The gold query's own answers on the store: the ranking order-aware scores compare with, and the ceiling
    # (a published answer set the gold query itself does not reproduce caps every system alike).
    ranking, gold_error = _run(store, q.sparql, timeout)
    gold_values = ranked_values(ranking or [])
    expected = {normalize_answer(a) for a in q.answers}
    ceiling = answer_scores(gold_values, expected)
    if q.order_matters and ranking is not None:
        ceiling = ordered_answer_scores(gold_values, gold_values) if expected else ceiling
        if final:
            scores = ordered_answer_scores(values, gold_values)
    row["gold_query_f1"] = ceiling.f1
    row["gold_query_error"] = gold_error
    return {**row, **_scores(scores)}


def _scores(scores: AnswerScores) -> dict[str, float]:
    return {"precision": scores.precision, "recall": scores.recall, "f1": scores.f1}


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    gold = sum(len(r["gold_iris"]) for r in rows)
    right = sum(len(r["right_iris"]) for r in rows)
    invented = sum(len(r["invented_iris"]) for r in rows)
    verbatim = Counter(i for r in rows for i in r["verbatim_iris"])
    return {
        "questions": n,
        "statuses": dict(Counter(r["status"] for r in rows)),
        "gold_iris": gold,
        "gold_iris_right": right,
        "iri_accuracy": _share(right, gold),
        "invented_iris": invented,
        "queries_with_invented_iris": sum(bool(r["invented_iris"]) for r in rows),
        "verbatim_iris": dict(verbatim),
        "query_em": _share(sum(r["query_em"] for r in rows), n),
        "answer_precision": round(sum(r["precision"] for r in rows) / n, 4) if n else 0.0,
        "answer_recall": round(sum(r["recall"] for r in rows) / n, 4) if n else 0.0,
        "answer_f1": round(sum(r["f1"] for r in rows) / n, 4) if n else 0.0,
        "answer_set_f1": round(sum(r["set_f1"] for r in rows) / n, 4) if n else 0.0,
        "answers_exact": sum(r["f1"] == 1.0 for r in rows),
        # A resolved query the store could not run (its error in the row): the claim is 0.
        "execution_errors": sum(r["status"] == "resolved" and r["error"] is not None for r in rows),
        "gold_query_answer_f1": round(sum(r["gold_query_f1"] for r in rows) / n, 4) if n else 0.0,
        "order_aware_questions": sum(r["order_matters"] for r in rows),
    }


# TEXT2SPARQL'25's best published score on CK25 (2025): the challenge scored its own full CK25 question set, not
# the dev questions these runs answer; shown beside them for scale, never recomputed here.
TEXT2SPARQL25_BEST_CK25 = 0.436


def _statuses(statuses: Mapping[str, int]) -> str:
    main = [statuses.get(s, 0) for s in ("resolved", "refused", "invalid")]
    other = {k: v for k, v in sorted(statuses.items()) if k not in ("resolved", "refused", "invalid")}
    return " / ".join(map(str, main)) + "".join(f" (+{v} {k})" for k, v in other.items())


def _f(value: Any, digits: int = 4) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def systems_table(doc: Mapping[str, Any]) -> str:
    """One row per system of the run (its own and those kept from earlier runs), then the challenge's best."""
    rows = []
    for _, entry in ordered(systems_of(doc)):
        m = entry.get("metrics") or {}
        rows.append(
            [
                system_label(entry),
                run_label(entry),
                f"{m['gold_iris_right']} / {m['gold_iris']} ({m['iri_accuracy']:.2%})",
                m["invented_iris"],
                m.get("execution_errors", "-"),
                _statuses(m["statuses"]),
                f"{m['query_em']:.2%}",
                _f(m["answer_precision"]),
                _f(m["answer_recall"]),
                _f(m["answer_f1"]),
                _f(m.get("answer_set_f1")),
                _f(entry.get("seconds_per_question"), 2),
            ]
        )
    rows.append(
        ["TEXT2SPARQL'25 best published on CK25", "2025", *["-"] * 8, f"{TEXT2SPARQL25_BEST_CK25:.3f}", "-"]
    )
    header = [
        "system",
        "run",
        "gold IRIs right",
        "invented IRIs",
        "store errors",
        "resolved / refused / invalid",
        "Query EM",
        "answer P",
        "answer R",
        "answer F1",
        "answer set F1",
        "s / question",
    ]
    return md_table(header, rows, left=(0, 1, 5))


def _row_note(entry: Mapping[str, Any]) -> str:
    """What a row's generator is, and the run it was kept from."""
    condition = entry.get("condition")
    if condition == "oracle":
        note = (
            "each gold query converted to SPARQL-PGMR with the graph's labels is the generator's output (what a "
            "generator trained on the graph's converted pairs learns to write), so what is left to go wrong is "
            "the memory and the resolver"
        )
    elif condition == "chat":
        g = entry.get("generator") or {}
        how = [
            w for w, on in (("grammar-constrained", g.get("grammar")), ("two-step", g.get("two_step"))) if on
        ]
        note = (
            "the chat model, on an OpenAI-compatible server"
            + (f" ({' and '.join(how)})" if how else "")
            + f", writes the intermediate queries prompted with the graph's schema (a "
            f"{g.get('system_chars', '?')}-character system message) and {g.get('examples', '?')} examples "
            "written from it: no training pair of the graph"
        )
    else:
        note = "the trained generator writes the intermediate queries"
    carried = entry.get("carried_from")
    if carried:
        note += (
            f"; not re-run here, kept from the run of {carried.get('started_at')} "
            f"(`{carried.get('command') or 'command not recorded'}`)"
        )
    return note + "."


def tables(doc: Mapping[str, Any]) -> str:
    """Every system of the run as a row of one table (beside the challenge's best published score), with what
    the rows and columns are, which rows were kept from earlier runs, and the ceiling the gold queries set."""
    m = doc["metrics"]
    systems = ordered(systems_of(doc))
    lines = [
        f"{m['questions']} questions of `{Path(str(doc['questions_file'])).name}` over the graph "
        f"`{Path(str(doc['graph_file'])).name}`; each row's final queries are run on an embedded store holding "
        "the graph and scored against the published answers.",
        "",
        systems_table(doc),
        "",
    ]
    for _, entry in systems:
        lines.append(f"- {system_label(entry)}: {_row_note(entry)}")
    thresholds = {e.get("min_confidence") for _, e in systems}
    lines += [
        "- Columns: *gold IRIs right*, the IRIs of the gold queries that belong to the graph which the final "
        "query names too; *invented IRIs*, IRIs of the final queries that the graph does not hold anywhere; "
        "*store errors*, resolved queries the store could not run; *resolved / refused / invalid*, the questions "
        "by outcome (a refused or invalid question is an empty answer); *answer P / R / F1*, macro over all "
        "questions with QALD's rules for empty sides, order-aware on the "
        f"{m['order_aware_questions']} question(s) whose answer order matters; *answer set F1*, the same with "
        "order ignored everywhere; *s / question*, generation and resolution (the oracle: resolution only) on "
        "the machine of its run."
        + (
            f" Refusal threshold {next(iter(thresholds))} in every row."
            if len(thresholds) == 1
            else " Refusal thresholds: "
            + "; ".join(f"{system_label(e)} {e.get('min_confidence')}" for _, e in systems)
            + "."
        ),
        f"- The gold queries' own answers on the store score F1 {m['gold_query_answer_f1']:.4f}: "
        "the ceiling of every row (a published answer set the gold query does not reproduce caps all alike).",
    ]
    if m["verbatim_iris"]:
        kept = ", ".join(f"`{i}` x{c}" for i, c in sorted(m["verbatim_iris"].items()))
        lines.append(f"- IRIs written as they are (vocabulary, other datasets; not scored): {kept}.")
    lines.append(
        f"- TEXT2SPARQL'25 best published on CK25: {TEXT2SPARQL25_BEST_CK25} (2025), the challenge's score over "
        f"its own full CK25 question set; the rows above answer the {m['questions']} questions of "
        f"`{Path(str(doc['questions_file'])).name}`, so it gives the scale, not a comparison on the same "
        "questions."
    )
    return "\n".join(lines)


def details(doc: Mapping[str, Any]) -> str:
    """This run's own system, measure by measure."""
    m = doc["metrics"]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(m["statuses"].items()))
    lines = [
        f"Condition **{doc['condition']}**"
        + (f" (model {doc['model']})" if doc.get("model") else "")
        + f"; {m['questions']} questions of {doc['questions_file']} over {doc['graph_file']}.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| questions ({statuses}) | {m['questions']} |",
        f"| gold IRIs of the graph resolved right | {m['gold_iris_right']} / {m['gold_iris']} "
        f"({m['iri_accuracy']:.2%}) |",
        f"| IRIs invented (not in the graph) | {m['invented_iris']} (in {m['queries_with_invented_iris']} queries) |",
        f"| Query EM | {m['query_em']:.2%} |",
        f"| answer precision / recall / F1 (macro) | {m['answer_precision']:.4f} / {m['answer_recall']:.4f} / "
        f"{m['answer_f1']:.4f} |",
        f"| answer set F1 (macro; order ignored everywhere) | {m.get('answer_set_f1', 0.0):.4f} |",
        f"| questions with every answer right (F1 = 1) | {m['answers_exact']} |",
        f"| resolved queries the store could not run | {m.get('execution_errors', 0)} |",
        f"| the gold queries' own answer F1 on the store (the ceiling) | {m['gold_query_answer_f1']:.4f} |",
        f"| order-aware questions | {m['order_aware_questions']} |",
    ]
    if doc.get("condition") != "oracle" and "seconds_per_question" in doc:
        lines.append(
            f"| seconds per question (generation and resolution) | {doc['seconds_per_question']:.2f} |"
        )
    if m["verbatim_iris"]:
        kept = ", ".join(f"`{i}` x{c}" for i, c in sorted(m["verbatim_iris"].items()))
        lines += ["", f"IRIs written as they are (vocabulary, other datasets; not scored): {kept}."]
    return "\n".join(lines)


def _misses(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| id | status | IRIs right | Query EM | F1 | why |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["f1"] == 1.0 and r["query_em"] and len(r["right_iris"]) == len(r["gold_iris"]):
            continue
        why = r["error"] or r["reason"]
        if not why and r["f1"] < 1.0:
            why = "answers differ" + (
                f" (the gold query's own F1: {r['gold_query_f1']:.3f})" if r["query_em"] else ""
            )
        why = why or "query differs, same answers"
        lines.append(
            f"| {r['id']} | {r['status']} | {len(r['right_iris'])}/{len(r['gold_iris'])} | "
            f"{'yes' if r['query_em'] else 'no'} | {r['f1']:.3f} | {str(why).replace('|', '/')[:160]} |"
        )
    return "\n".join(lines) if len(lines) > 2 else "Every question: IRIs right, Query EM, every answer right."


def write_outputs(out_dir: Path, doc: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
    """metrics.json, predictions.jsonl and report.md, each written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "metrics.json", doc)
    write_jsonl(out_dir / "predictions.jsonl", rows)
    label = system_label(systems_of(doc).get(str(doc.get("system")), doc))
    report = (
        f"# {doc['title']}\n\n{tables(doc)}\n\n## This run: {label}\n\n{details(doc)}\n\n"
        f"## Questions not fully right (this run)\n\n{_misses(rows)}\n"
    )
    if doc.get("command"):
        report += f"\nCommand: `{doc['command']}` ({doc['wall_seconds']} s)\n"
    atomic_write_text(out_dir / "report.md", report)


__all__ = [
    "TEXT2SPARQL25_BEST_CK25",
    "details",
    "score_question",
    "summary",
    "systems_table",
    "tables",
    "write_outputs",
]
