#!/usr/bin/env bash
# Where attention over key blocks (online softmax) overtakes whole rows of scores: one random
# ViT (bench/export_large.py's, fp32, batch 1) timed with each path forced (VITREG_ATTENTION)
# at growing input sizes; the forward's ms/image, best of ROUNDS (default 3) runs of ITERS.
#   bench/attention_crossover.sh [WORKDIR] [SIZE small|base] [PX...]   (default px: 224 322 434 518 630 728 1022 1442)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/vitreg-dense-large}; size=${2:-small}; shift $(($# > 2 ? 2 : $#))
pxs=${*:-224 322 434 518 630 728 1022 1442}
rounds=${ROUNDS:-3}; threads=${THREADS:-2}
/usr/bin/python3 -c 'import torch, onnx' 2>/dev/null || apt-get install -y -q python3-torch python3-onnx >/dev/null
"$root/scripts/build.sh" vitreg >/dev/null
stem=$(/usr/bin/python3 "$root/bench/export_large.py" "$work" --size "$size" --image 518 2>/dev/null | tail -1)
time_path() {  # PATH PX -> best ms/image
  local best=""
  for ((r = 0; r < rounds; r++)); do
    ms=$(VITREG_ATTENTION=$1 "$root/build/apps/vitreg" bench "$stem.safetensors" --threads "$threads" --size "$2x$2" \
      --iters "${ITERS:-3}" --warmup 1 | sed -n 's/.*: \([0-9.]*\) ms\/image median.*/\1/p')
    best=$(printf '%s\n' $best "$ms" | sort -g | head -1)
  done
  echo "$best"
}
printf 'CPU: %s, %s threads; %s\n' "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" "$threads" "$(basename "$stem")"
printf '| px | tokens | whole rows ms | key blocks ms | blocks / rows |\n|---|---|---|---|---|\n'
for px in $pxs; do
  rows=$(time_path rows "$px"); blocks=$(time_path blocks "$px")
  awk -v px="$px" -v r="$rows" -v b="$blocks" 'BEGIN {
    printf "| %d | %d | %.1f | %.1f | %.3f |\n", px, int(px / 14) * int(px / 14) + 5, r, b, b / r }'
done
