#!/usr/bin/env bash
# Joins the model parts that scripts/device/train.sh wrote on the GPU machine into a model dir here.
# Usage: scripts/device/collect.sh FILES_AT OUT_DIR   (FILES_AT: the folder run() returned the files in)
set -euo pipefail
SRC="${1:?usage: collect.sh FILES_AT OUT_DIR}"; DEST="${2:?usage: collect.sh FILES_AT OUT_DIR}"
[ -e "$DEST" ] && { echo "error: $DEST exists; name a new dir" >&2; exit 2; }
(cd "$SRC" && sha256sum -c SHA256SUMS) || { echo "error: a part is missing or damaged" >&2; exit 2; }
tmp="$(dirname "$DEST")/.$(basename "$DEST").partial"
rm -rf "$tmp" && mkdir -p "$tmp"
cat "$SRC"/model.tar.part-* | tar -xf - -C "$tmp"
mv "$tmp/packed" "$DEST" && rmdir "$tmp"
[ -f "$SRC/train.log" ] && cp "$SRC/train.log" "$DEST/device-train.log"
echo "model in $DEST; evaluate: pgmr generate $DEST lcquad2-validation --resolve -o v.jsonl"
