#!/usr/bin/env bash
# Large inputs: vitreg against ONNX Runtime on the same random-weight ViT (DINOv2 layout, 4
# registers, fp32) at 518, 1022 and 2044 px, 2 threads, batch 1, in one run.
#   bench/dense_large.sh [WORKDIR] [SIZES] [PX]      (defaults: /tmp/vitreg-dense-large "small base" "518 1022 2044")
# Prints one table: ms/image and peak RSS of each, their ratios, and at the largest size the
# forward's share of the 2-core FMA peak that `vitreg bench --peak` measures. One timed forward
# per case (after one untimed one below 2044 px; at 2044 px the first forward is the one timed,
# for both). ONNX Runtime is killed where its resident set passes ORT_CAP_MB (default: 60% of
# the available memory; its attention holds every head's N x N scores) and the table says so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/vitreg-dense-large}; sizes=${2:-small base}; pxs=${3:-518 1022 2044}
peers="$root/../shared/peers"
[[ -f "$peers/make_model.py" ]] || { echo "bench/dense_large.sh: $peers/make_model.py not found" >&2; exit 1; }
available_mb=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
cap=${ORT_CAP_MB:-$((available_mb * 6 / 10))}
mkdir -p "$work"
/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || apt-get install -y -q python3-torch python3-numpy >/dev/null
/usr/bin/python3 -c 'import onnx' 2>/dev/null || apt-get install -y -q python3-onnx >/dev/null
if [[ ! -d "$work/node_modules/onnxruntime-node" ]]; then
  (cd "$work" && npm init -y >/dev/null && npm install --ignore-scripts onnxruntime-node@1.30.0 >/dev/null 2>&1)
fi
"$root/scripts/build.sh" vitreg >/dev/null
vitreg="$root/build/apps/vitreg"
measure() { /usr/bin/python3 "$root/bench/peak_rss.py" "$@"; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2" | tail -1; }

printf 'CPU: %s, %s threads used of %s; %s MB available, ONNX Runtime capped at %s MB\n' \
  "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" 2 "$(nproc)" "$available_mb" "$cap"
printf '| model | px | tokens | vitreg ms | vitreg peak RSS MB | ORT ms | ORT peak RSS MB | vitreg / ORT time | vitreg / ORT RSS | vitreg share of FMA peak |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for size in $sizes; do
  for px in $pxs; do
    stem=$(/usr/bin/python3 "$root/bench/export_large.py" "$work" --size "$size" --image "$px" 2>/dev/null | tail -1)
    warmup=1; peak_flag=()
    if [[ "$px" == "${pxs##* }" ]]; then warmup=0; peak_flag=(--peak); fi
    v=$(measure 1000000 "$vitreg" bench "$stem.safetensors" --threads 2 --batch 1 --size "${px}x${px}" --iters 1 \
      --warmup "$warmup" "${peak_flag[@]}" 2>&1)
    v_ms=$(sed -n 's/.*: \([0-9.]*\) ms\/image median.*/\1/p' <<<"$v" | head -1)
    v_rss=$(field peak_rss_mb "$v"); v_state=$(field status "$v")
    share=$(sed -n 's/^forward: \([0-9.]*%\) of .*/\1/p' <<<"$v" | head -1)
    tokens=$(( (px / 14) * (px / 14) + 5 ))
    o=$(ORT_HOME=$work measure "$cap" node "$root/bench/ort_large.js" "$stem.onnx" "$px" 2 "$warmup" 2>&1)
    o_ms=$(sed -n 's/^onnxruntime: \([0-9.]*\) ms\/image.*/\1/p' <<<"$o" | head -1)
    o_rss=$(field peak_rss_mb "$o"); o_state=$(field status "$o")
    [[ "$v_state" == ok ]] || v_ms="failed ($v_state)"
    [[ "$o_state" == ok ]] || o_ms="out of memory ($o_state at ${cap} MB)"
    awk -v s="$size" -v px="$px" -v n="$tokens" -v vm="$v_ms" -v vr="$v_rss" -v om="$o_ms" -v orr="$o_rss" \
      -v share="${share:-–}" 'BEGIN {
      t = (vm + 0 > 0 && om + 0 > 0) ? sprintf("%.2f", vm / om) : "–"
      r = (vr + 0 > 0 && orr + 0 > 0 && om + 0 > 0) ? sprintf("%.2f", vr / orr) : "–"
      if (om + 0 == 0 && orr + 0 > 0) r = sprintf("< %.2f", vr / orr)
      printf "| ViT-%s/14 | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", s == "small" ? "S" : "B", px, n, vm, vr, om, orr, t, r, share }'
  done
done
