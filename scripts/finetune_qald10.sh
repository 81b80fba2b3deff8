#!/usr/bin/env bash
# The default generator's recipe fine-tuned on QALD-10's own training questions (qald10-train, 412), for the
# `pgmr-qald10-train` row of `pgmr experiment qald10 --finetuned runs/pgmr-qald10/ensemble`:
#   1. the ensemble's seq2seq member (models/pgmr-default) trained on for 400 steps on qald10-train (resumable:
#      rerunning this script continues from the last checkpoint in runs/pgmr-qald10/run);
#   2. packed as int8 into runs/pgmr-qald10/seq2seq;
#   3. an ensemble of it and the unchanged structured members (their template classes are LC-QuAD's) with the
#      shipped reranker and draft verifier, in runs/pgmr-qald10/ensemble.
# About 9 minutes on 2 CPU cores. Usage: scripts/finetune_qald10.sh [DATA_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR="${1:-../shared/data}"
PGMR="${PGMR:-.venv/bin/pgmr}"
OUT=runs/pgmr-qald10

"$PGMR" --data-dir "$DATA_DIR" train --mode pgmr -o "$OUT/run" --base models/pgmr-default --train qald10-train \
  --max-description-words 0 --batch-size 16 --lr 3e-4 --encoder-lr 3e-5 --warmup-steps 20 --max-steps 400 \
  --eval-steps 50 --max-eval-examples 100 --max-source-len 64 --max-target-len 160 --bf16
"$PGMR" pack "$OUT/run/model" -o "$OUT/seq2seq"
mkdir -p "$OUT/ensemble"
cp models/pgmr-ensemble/reranker.json "$OUT/ensemble/reranker.json"
rm -rf "$OUT/ensemble/verifier"
if [ -d models/pgmr-ensemble/verifier ]; then cp -r models/pgmr-ensemble/verifier "$OUT/ensemble/verifier"; fi
cat > "$OUT/ensemble/model_card.json.tmp" <<'CARD'
{
  "backend": "ensemble",
  "mode": "pgmr",
  "members": [
    {"name": "seq2seq", "path": "../seq2seq"},
    {"name": "structured", "path": "../../../models/pgmr-structured"},
    {"name": "structured-s7", "path": "../../../models/pgmr-structured-s7"}
  ],
  "description": "The default generator's recipe fine-tuned on QALD-10 train (scripts/finetune_qald10.sh): its seq2seq member fine-tuned for 400 steps on qald10-train; the structured members, the reranker and the verifier unchanged."
}
CARD
mv "$OUT/ensemble/model_card.json.tmp" "$OUT/ensemble/model_card.json"
echo "wrote $OUT/ensemble: pgmr experiment qald10 --finetuned $OUT/ensemble"
