#!/usr/bin/env bash
# vitreg against ONNX Runtime and PyTorch on the same random-weight ViT, in one run.
#   bench/peers.sh [WORKDIR] [size small|base|large] [registers] [image px]
# Prints one table of ms/image at 1 and 2 threads, batch 1 and 8, with vitreg's ratio to each
# peer; then one of the precisions at batch 8: vitreg fp32 / bf16 / int8 (per token) against
# ORT fp32 and ORT's own dynamic int8, with the ratios #15 targets. Each case runs ROUNDS times (default 3), vitreg then ORT, and keeps each one's best:
# on a shared machine a neighbour's burst can slow either side of a single pair.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/vitreg-peers}; size=${2:-small}; regs=${3:-4}; img=${4:-224}
images=${IMAGES:-80}  # images timed per case (IMAGES=16 for ViT-B or 518 px)
rounds=${ROUNDS:-3}
peers="$root/../shared/peers"
[[ -f "$peers/run-peers.sh" ]] || { echo "bench/peers.sh: $peers/run-peers.sh not found" >&2; exit 1; }
"$root/scripts/build.sh" vitreg >/dev/null
log=$(bash "$peers/run-peers.sh" "$work" "$size" "$regs" "$img")
model=$(sed -n 's/^model: \(.*\.safetensors\) .*/\1/p' <<<"$log")
torch() { sed -n "s/^pytorch .*threads=$1 batch=$2: \([0-9.]*\) ms\/image.*/\1/p" <<<"$log" | head -1; }
iters() { echo $((images / $1 > 2 ? images / $1 : 2)); }  # forwards of batch $1
int8_onnx=$(sed -n 's/^int8 model: \(.*\.onnx\)$/\1/p' <<<"$log")
# ort THREADS BATCH [ONNX]; vit THREADS BATCH [PRECISION]
ort() {
  ORT_HOME=$work node "$peers/ort_bench.js" "${3:-${model%.safetensors}.onnx}" "$1" "$2" "$(iters "$2")" |
    sed -n 's/.*: \([0-9.]*\) ms\/image.*/\1/p'
}
vit() {
  "$root/build/apps/vitreg" bench "$model" --threads "$1" --batch "$2" --iters "$(iters "$2")" --warmup 2 \
    --precision "${3:-fp32}" | sed -n 's/.*: \([0-9.]*\) ms\/image median.*/\1/p'
}
best() { printf '%s\n' "$@" | sort -g | head -1; }
printf 'model: %s (%s px, fp32, same weights in every runtime; best of %d rounds)\n' "$(basename "$model")" "$img" "$rounds"
printf '| threads | batch | vitreg ms/image | ONNX Runtime ms/image | PyTorch ms/image | vitreg / ORT | vitreg / PyTorch |\n'
printf '|---|---|---|---|---|---|---|\n'
for case in "1 1" "2 1" "1 8" "2 8"; do
  read -r t b <<<"$case"
  vs=(); os=()
  for ((r = 0; r < rounds; r++)); do vs+=("$(vit "$t" "$b")"); os+=("$(ort "$t" "$b")"); done
  v=$(best "${vs[@]}"); o=$(best "${os[@]}"); p=$(torch "$t" "$b")
  awk -v t="$t" -v b="$b" -v v="$v" -v o="$o" -v p="$p" 'BEGIN {
    printf "| %d | %d | %.1f | %.1f | %s | %.2f | %s |\n", t, b, v, o, p == "" ? "–" : sprintf("%.1f", p), v / o,
           p == "" ? "–" : sprintf("%.2f", v / p) }'
done

if [[ -n "$int8_onnx" ]]; then
  printf '\nprecisions, batch 8 (ms/image, best of %d rounds; ORT int8 = its dynamic quantization of the same graph)\n' "$rounds"
  printf '| threads | vitreg fp32 | vitreg bf16 | vitreg int8 | ORT fp32 | ORT int8 | bf16 / fp32 | int8 / fp32 | int8 / ORT int8 | ORT fp32 / vitreg int8 |\n'
  printf '|---|---|---|---|---|---|---|---|---|---|\n'
  for t in 1 2; do
    f=(); h=(); q=(); o=(); oq=()
    for ((r = 0; r < rounds; r++)); do
      f+=("$(vit "$t" 8 fp32)"); h+=("$(vit "$t" 8 bf16)"); q+=("$(vit "$t" 8 int8)")
      o+=("$(ort "$t" 8)"); oq+=("$(ort "$t" 8 "$int8_onnx")")
    done
    awk -v t="$t" -v f="$(best "${f[@]}")" -v h="$(best "${h[@]}")" -v q="$(best "${q[@]}")" -v o="$(best "${o[@]}")" \
      -v oq="$(best "${oq[@]}")" 'BEGIN {
      printf "| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f |\n", t, f, h, q, o, oq, h / f, q / f, q / oq, o / q }'
  done
fi
