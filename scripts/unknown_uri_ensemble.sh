#!/usr/bin/env bash
# The shipped default's recipe on the unknown-URI split, for the `pgmr-ensemble` row of
# `pgmr experiment lcquad2-unknown-uri` (issue #18). Every step resumes where it stopped, so rerun it after an
# interruption:
#   1. the two structured members, models/pgmr-structured's recipe (10,000 steps) on the split's training part:
#      seed 42 (as models/pgmr-structured) and seed 7 (as models/pgmr-structured-s7)
#      (scripts/train_unknown_uri_structured.py; ~80 min each alone on 2 CPU cores);
#   2. the seq2seq member, models/pgmr-default's recipe (6,000 steps, bfloat16 for time; ~65 min), into
#      OUT/experiment/runs/pgmr, with its row `pgmr`;
#   3. the row `pgmr-ensemble`: the three members, a reranker fitted on the split's validation part (~10 min);
#   4. the ensemble's draft verifier, as the shipped default's: its training rows from the members' drafts of
#      the split's training part (scripts/unknown_uri_verifier_drafts.py, ~25 min), `pgmr train-verifier`
#      (~1 h), then the row again with it (--verifier; the reranker is refitted with its signal).
# The rows of the published run (docs/results/lcquad2-unknown-uri) that are not rerun are kept beside them.
# Usage: scripts/unknown_uri_ensemble.sh [OUT (default runs/unknown-uri)] [DATA_DIR (default ../shared/data)]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/unknown-uri}"
DATA_DIR="${2:-../shared/data}"
PYTHON="${PYTHON:-.venv/bin/python}"
PGMR="${PGMR:-.venv/bin/pgmr}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

if [ ! -f "$OUT/structured/model/model_card.json" ]; then
  "$PYTHON" scripts/train_unknown_uri_structured.py -o "$OUT/structured" --data-dir "$DATA_DIR"
fi
if [ ! -f "$OUT/structured-s7/model/model_card.json" ]; then
  "$PYTHON" scripts/train_unknown_uri_structured.py -o "$OUT/structured-s7" --data-dir "$DATA_DIR" --seed 7
fi
experiment() {
  "$PGMR" --data-dir "$DATA_DIR" experiment lcquad2-unknown-uri -o "$OUT/experiment" --modes pgmr \
    --max-steps 6000 --max-minutes 130 --eval-steps 1000 --max-eval-examples 300 --bf16 --batch-size 32 \
    --no-refusal --keep-from docs/results/lcquad2-unknown-uri --structured "$OUT/structured" \
    --member structured-s7="$OUT/structured-s7" "$@"
}
if [ ! -f "$OUT/verifier/model/model_card.json" ]; then
  if [ ! -f "$OUT/verifier-rows.jsonl" ]; then
    [ -f "$OUT/experiment/runs/pgmr-ensemble/reranker.json" ] || experiment
    "$PYTHON" scripts/unknown_uri_verifier_drafts.py "$OUT/experiment/runs/pgmr-ensemble" \
      -o "$OUT/verifier-rows.jsonl" --data-dir "$DATA_DIR"
  fi
  "$PGMR" train-verifier "$OUT/verifier-rows.jsonl" -o "$OUT/verifier"
fi
experiment --verifier "$OUT/verifier"
echo "wrote $OUT/experiment: publish it with pgmr experiment results-doc"
