"""Split a drafts file (`pgmr generate` of an ensemble: each row's 'drafts', one per member) into one
predictions file per member, {id, question, prediction}, for tools that read one output per question
(scripts/fit_refusal.py pools them to fit the support model on every draft the shipped generator writes).

    .venv/bin/python scripts/split_drafts.py artifacts/rerank/validation.drafts.jsonl -o artifacts/refusal-calibration/drafts
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def split(path: Path) -> dict[str, list[dict[str, str]]]:
    by_source: dict[str, list[dict[str, str]]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        drafts = row.get("drafts")
        if not isinstance(drafts, list) or not drafts:
            raise SystemExit(f"{path}:{number}: no 'drafts' (not an ensemble's output?)")
        for draft in drafts:
            by_source.setdefault(str(draft["source"]), []).append(
                {"id": row["id"], "question": row.get("question"), "prediction": draft["text"]}
            )
    sizes = {len(rows) for rows in by_source.values()}
    if len(sizes) != 1:
        raise SystemExit(f"{path}: the members drafted different numbers of questions: {sizes}")
    return by_source


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("drafts", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for source, rows in split(args.drafts).items():
        target = args.out / f"{source}.jsonl"
        target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        print(f"{target}: {len(rows)} predictions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
