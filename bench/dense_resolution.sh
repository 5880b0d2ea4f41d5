#!/usr/bin/env bash
# Dense features at resolution, timed (not a test). A 2044 px image (a shipped photo resized)
# through a 518/336 sliding window (DINOv3's 512/341 at patch 14), against the same crops'
# forwards alone (one batch through Model.forward); then bilinear and JBU upsampling of its
# 146x146 grid to 2044x2044 pixels in f16, streamed to the file by `vitreg dense`, timed as the
# difference from the same command without upsampling, with each command's peak RSS.
# Usage: bench/dense_resolution.sh [MODEL] [THREADS]   (needs build/apps/vitreg, build/python)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-vitreg-untrained-s14-d192-reg4}
threads=${2:-2}
vitreg=build/apps/vitreg
python=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -c "from PIL import Image; Image.open('assets/images/chelsea.png').convert('RGB').resize((2044, 2044), Image.BICUBIC).save('$tmp/big.png')"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads; model $model"
PYTHONPATH=build/python "$python" - "$model" "$threads" "$tmp/big.png" <<'PY'
import sys, time
import numpy as np
import vitreg
model, threads, image = sys.argv[1], int(sys.argv[2]), sys.argv[3]
m = vitreg.Model(model, threads=threads, max_tokens=0)
x = m.preprocess(image, resize="none")
n = (x.shape[1] - 518 + 335) // 336 + 1
crops = np.ascontiguousarray(np.stack([x[:, :518, :518]] * (n * n)))
def best(call, runs=2):
    t = []
    for _ in range(runs):
        s = time.perf_counter(); call(); t.append(time.perf_counter() - s)
    return min(t)
f = best(lambda: m.forward(crops))
w = best(lambda: m.dense(x, window=518, stride=336))
print(f"window 518/336 on {x.shape[2]}x{x.shape[1]}: {n * n} crops; forwards alone {f:.2f} s, "
      f"windowed dense {w:.2f} s = {w / f:.2f}x")
PY
run() {  # run NAME ARGS...: wall seconds and peak RSS of one vitreg dense
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$tmp/$name.time" "$vitreg" dense "$model" "$tmp/big.png" -o "$tmp/$name" --resize none \
    --max-tokens 0 --threads "$threads" --window 518 --stride 336 --dtype f16 "$@" >/dev/null 2>&1
  rm -rf "${tmp:?}/$name"
  read -r secs kb < "$tmp/$name.time"
  echo "$secs $kb"
}
read -r base base_kb <<< "$(run grid)"
echo "vitreg dense, grid only:        ${base} s, peak RSS $((base_kb / 1024)) MB"
for method in bilinear jbu; do
  read -r secs kb <<< "$(run "$method" --upsample "$method")"
  awk -v m="$method" -v s="$secs" -v b="$base" -v kb="$kb" 'BEGIN {
    printf "  + %-8s to 2044x2044 f16: %.2f s (upsampling %.2f s = %.2fx the windowed forward), peak RSS %d MB\n",
           m, s, s - b, (s - b) / b, kb / 1024 }'
done
