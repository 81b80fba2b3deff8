#!/usr/bin/env bash
# Runs ON a lent GPU machine (device tool), from the repo root, with .device-kit carried
# (scripts/device/prepare.sh builds it here). Goes on training the shipped default model
# (`pgmr train --base models/pgmr-default`: its weights and tokenizers) on LC-QuAD 2.0 with the same
# conversion and validation split as here, packs the kept model to int8 and writes it to $OUT in parts of
# at most 15 MiB (the tool brings back files of up to 16 MiB), with the log and checksums.
# scripts/device/collect.sh joins the parts here. Extra arguments go to `pgmr train` (later ones win).
#
#   run(command="bash scripts/device/train.sh --max-minutes 7", carry=[".device-kit"], timeout_s=600)
#
# Locally (a dry run on CPU): OUT=/tmp/out PYTHON=.venv/bin/python bash scripts/device/train.sh \
#   --max-steps 2 --max-eval-examples 4 --no-bf16 --no-anneal-to-budget
set -euo pipefail
KIT=.device-kit
PYTHON="${PYTHON:-python3}"
WORK="${WORK:-/tmp/pgmr-device}"
: "${OUT:?OUT must name the folder the model parts are written to}"
[ -f "$KIT/data.tar.xz" ] || { echo "error: no $KIT/data.tar.xz; run scripts/device/prepare.sh and carry $KIT" >&2; exit 2; }
rm -rf "$WORK" && mkdir -p "$WORK/data" "$OUT"
if [ "$PYTHON" = python3 ]; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" "$KIT"/wheels/*.whl
  export PYTHONPATH="$WORK/site:$PWD/src"
else
  export PYTHONPATH="$PWD/src"
fi
export PYTHONUNBUFFERED=1
tar -xJf "$KIT/data.tar.xz" -C "$WORK/data"
"$PYTHON" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '', '| transformers', transformers.__version__)" | tee "$OUT/train.log"
# The default's recipe (docs/generators.md), a new schedule from its weights; batch 64 for the GPU.
"$PYTHON" -m pgmr --data-dir "$WORK/data" train --mode pgmr -o "$WORK/run" --base models/pgmr-default \
  --max-description-words 0 --max-source-len 64 --max-target-len 160 \
  --batch-size 64 --lr 5e-4 --encoder-lr 5e-5 --warmup-steps 200 \
  --max-steps 100000 --max-minutes 7 --anneal-to-budget --bf16 \
  --eval-steps 1000 --max-eval-examples 300 --no-progress "$@" 2>&1 | tee -a "$OUT/train.log"
"$PYTHON" -m pgmr pack "$WORK/run" -o "$WORK/packed" | tee -a "$OUT/train.log"
cp "$WORK/packed/model_card.json" "$OUT/model_card.json"
tar -C "$WORK" -cf - packed | split -b 15M -d - "$OUT/model.tar.part-"
(cd "$OUT" && sha256sum model.tar.part-* > SHA256SUMS)
ls -la "$OUT"
