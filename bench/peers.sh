#!/usr/bin/env bash
# vitreg against ONNX Runtime and PyTorch on the same random-weight ViT, in one run.
#   bench/peers.sh [WORKDIR] [size small|base] [registers] [image px]
# Prints one table of ms/image (batch 1) at 1 and 2 threads, with vitreg's ratio to each peer.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/vitreg-peers}; size=${2:-small}; regs=${3:-4}; img=${4:-224}
peers="$root/../shared/peers/run-peers.sh"
[[ -x "$peers" || -f "$peers" ]] || { echo "bench/peers.sh: $peers not found" >&2; exit 1; }
"$root/scripts/build.sh" vitreg >/dev/null
log=$(bash "$peers" "$work" "$size" "$regs" "$img")
model=$(sed -n 's/^model: \(.*\.safetensors\) .*/\1/p' <<<"$log")
ms() { sed -n "s/^$1 .*threads=$2 batch=1: \([0-9.]*\) ms\/image.*/\1/p" <<<"$log" | head -1; }
vit() { "$root/build/apps/vitreg" bench "$model" --threads "$1" --iters 20 --warmup 3 | sed -n 's/.*: \([0-9.]*\) ms\/image median.*/\1/p'; }
printf 'model: %s (%s px, batch 1, fp32)\n' "$(basename "$model")" "$img"
printf '| threads | vitreg ms | ONNX Runtime ms | PyTorch ms | vitreg / ORT | vitreg / PyTorch |\n|---|---|---|---|---|---|\n'
for t in 1 2; do
  v=$(vit "$t"); o=$(ms onnxruntime "$t"); p=$(ms pytorch "$t")
  awk -v t="$t" -v v="$v" -v o="$o" -v p="$p" 'BEGIN { printf "| %d | %.1f | %.1f | %.1f | %.2f | %.2f |\n", t, v, o, p, v / o, v / p }'
done
