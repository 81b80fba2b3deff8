#!/usr/bin/env bash
# Builds .device-kit/ (git-ignored) for scripts/device/train.sh, which runs on a lent GPU machine.
# That machine reaches no network and gets only the working tree plus carried paths (64 MiB in all; the
# tracked tree, the shipped default model included, is ~34 MB), so the kit holds what it lacks:
#   data.tar.xz  LC-QuAD 2.0 and the label files from the data dir (~3.5 MB; read there, never committed)
#   wheels/      the transformers version this venv runs (the machine's is older) and rapidfuzz (not there)
# Usage: scripts/device/prepare.sh [DATA_DIR]   (default: $PGMR_DATA_DIR, else ../shared/data)
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA="${1:-${PGMR_DATA_DIR:-../shared/data}}"
PY=.venv/bin/python
KIT=.device-kit
for f in lcquad2/train.jsonl memory/entities.jsonl memory/properties.jsonl; do
  [ -f "$DATA/$f" ] || { echo "error: $DATA/$f is missing (pass the data dir)" >&2; exit 2; }
done
rm -rf "$KIT.partial" && mkdir -p "$KIT.partial/wheels"
tar -C "$DATA" -cJf "$KIT.partial/data.tar.xz" lcquad2/train.jsonl memory
version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
# The machine's Python is 3.12 on x86-64 (device README); rapidfuzz is compiled, transformers pure Python.
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$KIT.partial/wheels" "transformers==$(version transformers)" "rapidfuzz==$(version rapidfuzz)"
rm -rf "$KIT" && mv "$KIT.partial" "$KIT"
du -sh "$KIT" "$KIT"/* "$KIT"/wheels/*
echo "kit ready; tracked tree + kit must stay under 64 MiB: $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) bytes tracked"
