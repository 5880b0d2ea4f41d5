#!/usr/bin/env bash
# The main job on the embedded default: the sample images in assets/images through the
# checkpoint shipped in weights/ and its softmax-1 / sink retrofits, side by side
# (out/demo/compare/), and their features (out/demo/features/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh vitreg
model=vitreg-untrained-s14-d192-reg4
vitreg=build/apps/vitreg
$vitreg info "$model"
echo
$vitreg compare "$model" "$model@softmax1" "$model@sink" --images assets/images -o out/demo/compare
$vitreg extract "$model" assets/images -o out/demo/features --patch-tokens
echo
echo "Open out/demo/compare/report.html in a browser (one self-contained file), or look at"
echo "out/demo/compare/compare.png; the numbers are in out/demo/compare/stats.csv:"
awk -F, '{ sub(".*/", "", $1); printf "  %-14s %-52s %-9s %12s %9s %9s %10s %10s %16s\n", $1, $2, $3, $8, $9, $13, $17, $19, $20 }' \
  out/demo/compare/stats.csv
echo
echo "Features: out/demo/features/{cls,pooled,registers}.npy, patch/<row>.npy, manifest.jsonl"
