"""PNG plots of the experiments (matplotlib, Agg backend: no display needed).

matplotlib is the `bench` extra; without it the plots are left out with a note, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmr.experiments.documents import PAPER_COUNTERPART, PAPER_TABLE1
from pgmr.experiments.reporting import QUIET, Reporter

# (key in `overall`, label, key in the paper's table)
BAR_METRICS: tuple[tuple[str, str, str | None], ...] = (
    ("query_em", "Query EM", "query_em"),
    ("sqm", "SQM", None),
    ("bleu", "BLEU", "bleu"),
    ("uri_em", "URI EM", "uri_em"),
    ("hallucination_rate_catalog", "hallucinated IDs", "hallucination"),
)


def _pyplot(reporter: Reporter) -> Any:
    try:
        import matplotlib
    except ImportError:
        reporter.warn("matplotlib is not installed (pip install 'pgmr[bench]'): no plot written")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    """Through a temporary sibling and a rename, like every other output."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, path)
    return path


def systems_bar_plot(
    systems: Mapping[str, Mapping[str, Any]],
    path: Path,
    *,
    title: str,
    paper: bool = True,
    reporter: Reporter = QUIET,
) -> Path | None:
    """Grouped bars per metric (0-100): each evaluated system and (with `paper`) the paper's T5-small
    numbers, hatched."""
    plt = _pyplot(reporter)
    if plt is None:
        return None
    series: list[tuple[str, list[float | None], bool]] = []
    for name, entry in systems.items():
        if entry.get("status") != "ok":
            continue
        overall = entry["overall"]
        values = []
        for key, _, _ in BAR_METRICS:
            value = overall.get(key)
            values.append(None if value is None else (value if key == "bleu" else 100 * value))
        series.append((name, values, False))
    for name in systems if paper else ():
        counterpart = PAPER_COUNTERPART.get(name)
        if counterpart:
            ref = PAPER_TABLE1[counterpart]
            series.append(
                (f"{counterpart} (paper)", [ref.get(p) if p else None for _, _, p in BAR_METRICS], True)
            )
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / max(len(series), 1)
    for i, (label, values, hatched) in enumerate(series):
        xs = [m + (i - (len(series) - 1) / 2) * width for m in range(len(BAR_METRICS))]
        heights = [v if v is not None else 0.0 for v in values]
        bars = ax.bar(
            xs, heights, width, label=label, hatch="//" if hatched else None, alpha=0.6 if hatched else 1
        )
        for bar, value in zip(bars, values, strict=True):
            if value is not None:
                ax.annotate(
                    f"{value:.1f}",
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=6,
                )
    ax.set_xticks(range(len(BAR_METRICS)), [label for _, label, _ in BAR_METRICS])
    ax.set_ylabel("percent (BLEU 0-100)")
    ax.set_ylim(0, 105)
    ax.set_title(title, fontsize=10)
    if series:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    saved = _save(fig, path)
    plt.close(fig)
    return saved


def distractor_plot(
    results: Sequence[Mapping[str, Any]], path: Path, *, title: str, reporter: Reporter = QUIET
) -> Path | None:
    """Query EM, SQM and URI EM against the number of entities in memory."""
    plt = _pyplot(reporter)
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [r["entities_in_memory"] for r in results]
    for key, label in (("query_em", "Query EM"), ("sqm", "SQM"), ("uri_em", "URI EM")):
        ys = [100 * (r["overall"].get(key) or 0.0) for r in results]
        ax.plot(xs, ys, marker="o", label=label)
    for r, x in zip(results, xs, strict=True):
        ax.annotate(
            r["label"],
            (x, 100 * (r["overall"].get("query_em") or 0.0)),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=7,
        )
    ax.set_xscale("log")
    ax.set_xlabel("entities in memory (log scale)")
    ax.set_ylabel("percent of questions")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    saved = _save(fig, path)
    plt.close(fig)
    return saved


def refusal_plot(
    doc: Mapping[str, Any], path: Path, *, title: str, reporter: Reporter = QUIET
) -> Path | None:
    """Left: refusal precision/recall and answerable refused against the confidence threshold, one colour per
    unanswerable set; right: the risk-coverage curves (Query EM of the answered questions against coverage)."""
    plt = _pyplot(reporter)
    if plt is None:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = ("tab:blue", "tab:orange", "tab:green")
    for colour, (name, v) in zip(colours, doc["variants"].items(), strict=False):
        curve = v["curve"]
        t = [p["threshold"] for p in curve]
        axes[0].plot(t, [p["refusal_precision"] for p in curve], color=colour, label=f"precision ({name})")
        axes[0].plot(t, [p["refusal_recall"] for p in curve], "--", color=colour, label=f"recall ({name})")
        axes[0].plot(
            t,
            [p["answerable_refused"] for p in curve],
            ":",
            color=colour,
            label=f"answerable refused ({name})",
        )
        rc = v.get("risk_coverage") or []
        axes[1].plot(
            [p["coverage"] for p in rc],
            [p["accuracy"] for p in rc],
            color=colour,
            label=f"{name} (area {v['area']:.3f})" if v.get("area") is not None else name,
        )
    full = doc.get("answerable") or {}
    if full.get("risk_coverage"):
        axes[1].plot(
            [p["coverage"] for p in full["risk_coverage"]],
            [p["accuracy"] for p in full["risk_coverage"]],
            color="black",
            label=f"none removed (area {full['area']:.3f})",
        )
    if doc.get("threshold") is not None:
        axes[0].axvline(doc["threshold"], color="grey", linewidth=0.8)
    axes[0].set_xlabel("refusal threshold (confidence)")
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].set_title("Refusal precision / recall", fontsize=10)
    axes[0].legend(fontsize=6)
    axes[1].set_xlabel("coverage (share answered, most confident first)")
    axes[1].set_ylabel("Query EM of answered")
    axes[1].set_xlim(-0.02, 1.02)
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].set_title("Risk-coverage", fontsize=10)
    axes[1].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    saved = _save(fig, path)
    plt.close(fig)
    return saved
