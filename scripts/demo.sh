#!/usr/bin/env bash
# The main job on the embedded default: vitreg's trained family (weights/vitreg-fmnist-*: the
# same small ViT trained with softmax, softmax + 4 registers, softmax-1, softmax-1 + 4 registers
# and a learned sink) side by side on the in-distribution samples in assets/indist
# (out/demo/compare/), plus the features of assets/images (out/demo/features/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh vitreg
vitreg=build/apps/vitreg
family=(softmax softmax-reg4 softmax1 softmax1-reg4 sink)
models=()
for c in "${family[@]}"; do models+=("weights/vitreg-fmnist-$c.safetensors"); done
$vitreg info "${models[1]}"
echo
$vitreg compare "${models[@]}" --images assets/indist --resize none -o out/demo/compare
$vitreg extract "${models[1]}" assets/images -o out/demo/features --resize 224x224 --patch-tokens --resume --overwrite
echo
echo "Open out/demo/compare/report.html in a browser (one self-contained file), or look at"
echo "out/demo/compare/compare.png; the numbers (last layer) are in out/demo/compare/stats.csv:"
awk -F, '{ sub(".*/", "", $1); printf "  %-34s %-28s %9s %9s %9s %10s %10s %16s\n", $1, $2, $8, $9, $13, $17, $19, $20 }' \
  out/demo/compare/stats.csv
echo
echo "Features: out/demo/features/{cls,pooled,registers}.npy, patch/<row>.npy, manifest.jsonl"
