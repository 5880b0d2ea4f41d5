#!/usr/bin/env bash
# The main job on the embedded default: vitreg's trained family (weights/vitreg-fmnist-*: the
# same small ViT trained with softmax, softmax + 4 registers, softmax-1, softmax-1 + 4 registers
# and a learned sink) side by side on the in-distribution samples in assets/indist
# (out/demo/compare/, and the explorer page out/demo/explore.html), the property table of
# softmax, registers, softmax-1 and sinks (docs/design.md, "The study's property table")
# measured on the family's 100 held-out images (out/demo/study/), plus the features of
# assets/images (out/demo/features/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh vitreg vitreg_python  # the command, and `import vitreg` (build/python) for the README's Python quick start
vitreg=build/apps/vitreg
family=(softmax softmax-reg4 softmax1 softmax1-reg4 sink)
models=()
for c in "${family[@]}"; do models+=("weights/vitreg-fmnist-$c.safetensors"); done
$vitreg info "${models[1]}"
echo
$vitreg compare "${models[@]}" --images assets/indist --resize none -o out/demo/compare
echo
$vitreg study "${models[@]}" --images tests/fixtures/heldout --labels tests/fixtures/heldout/labels.json \
  --resize none --sizes 112,224,448 -o out/demo/study
$vitreg explore "${models[@]}" --images assets/indist --resize none -o out/demo/explore.html
$vitreg extract "${models[1]}" assets/images -o out/demo/features --resize 224x224 --patch-tokens --resume --overwrite
echo
echo "Open out/demo/compare/report.html in a browser (one self-contained file), or look at"
echo "out/demo/compare/compare.png; the numbers (last layer, per image) are in out/demo/compare/stats.csv."
echo
echo "The study (how heads do nothing, sum of weights, cost, massive activations, int8, eviction,"
echo "retrofit, mass against the number of keys): open out/demo/study/study.html; numbers in"
echo "out/demo/study/study.json (docs/study.md) and study.csv."
echo
echo "The explorer: open out/demo/explore.html (one file, no server): hover or click a patch to see where it"
echo "looks in every configuration; layer slider, head, norms, outlines, rollout, registers' share ('?' lists the keys)."
echo
echo "Features: out/demo/features/{cls,pooled,registers}.npy, patch/<row>.npy, manifest.jsonl"
echo
echo "Python: PYTHONPATH=build/python python3 -c 'import vitreg; print(vitreg.Model(\"vitreg-untrained-s14-d192-reg4\"))'"
