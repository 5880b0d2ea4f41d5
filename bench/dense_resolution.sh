#!/usr/bin/env bash
# Dense features at resolution, timed (not a test). A 2044 px image (a shipped photo resized)
# through a 518/336 sliding window (DINOv3's 512/341 at patch 14), against the same crops'
# forwards alone (one batch through Model.forward); then bilinear and JBU upsampling of its
# 146x146 grid to 2044x2044 pixels in f16, streamed to the file by `vitreg dense`, timed as the
# difference from the same command without upsampling, against the windowed forward and the
# plain (unwindowed) forward of the whole image. Runs alternate (A B A B ...) and each ratio is
# taken pair by pair, its median printed: on a shared machine the speed drifts between runs.
# Usage: bench/dense_resolution.sh [MODEL] [THREADS] [ROUNDS]   (needs build/apps/vitreg, build/python)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-vitreg-untrained-s14-d192-reg4}
threads=${2:-2}
rounds=${3:-3}
vitreg=build/apps/vitreg
python=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -c "from PIL import Image; Image.open('assets/images/chelsea.png').convert('RGB').resize((2044, 2044), Image.BICUBIC).save('$tmp/big.png')"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads; model $model; $rounds rounds"
PYTHONPATH=build/python "$python" - "$model" "$threads" "$tmp/big.png" "$rounds" <<'PY'
import statistics, sys, time
import numpy as np
import vitreg
model, threads, image, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
m = vitreg.Model(model, threads=threads, max_tokens=0)
x = m.preprocess(image, resize="none")
n = (x.shape[1] - 518 + 335) // 336 + 1
crops = np.ascontiguousarray(np.stack([x[:, :518, :518]] * (n * n)))
def timed(call):
    s = time.perf_counter(); call(); return time.perf_counter() - s
timed(lambda: m.forward(crops))  # warm-up: the workspace's first allocation
f, w = [], []
for _ in range(rounds):
    f.append(timed(lambda: m.forward(crops)))
    w.append(timed(lambda: m.dense(x, window=518, stride=336)))
ratio = statistics.median(b / a for a, b in zip(f, w))
print(f"window 518/336 on {x.shape[2]}x{x.shape[1]}: {n * n} crops; forwards alone {statistics.median(f):.2f} s, "
      f"windowed dense {statistics.median(w):.2f} s (medians); paired ratio {ratio:.3f}x "
      f"(pairs {', '.join(f'{b / a:.3f}' for a, b in zip(f, w))})")
PY
run() {  # run NAME ARGS...: wall seconds and peak RSS of one vitreg dense
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$tmp/$name.time" "$vitreg" dense "$model" "$tmp/big.png" -o "$tmp/$name" --resize none \
    --max-tokens 0 --threads "$threads" --dtype f16 "$@" >/dev/null 2>&1
  rm -rf "${tmp:?}/$name"
  cat "$tmp/$name.time"
}
window=(--window 518 --stride 336)
: > "$tmp/rounds"
for ((r = 0; r < rounds; r++)); do
  echo "$(run grid "${window[@]}") $(run bilinear "${window[@]}" --upsample bilinear) $(run jbu "${window[@]}" --upsample jbu) $(run plain)" >> "$tmp/rounds"
done
# Each line: grid s kb, bilinear s kb, jbu s kb, plain s kb.
awk '{ printf "round %d: windowed grid %.2f s, + bilinear %.2f s, + jbu %.2f s; plain grid %.2f s\n", NR, $1, $3, $5, $7 }' "$tmp/rounds"
awk '
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { n++; g[n] = $1; p[n] = $7; kb[1] = $2 > kb[1] ? $2 : kb[1]; kb[2] = $4 > kb[2] ? $4 : kb[2]; kb[3] = $6 > kb[3] ? $6 : kb[3]
    bw[n] = ($3 - $1) / $1; bp[n] = ($3 - $1) / $7; jw[n] = ($5 - $1) / $1; jp[n] = ($5 - $1) / $7; ba[n] = $3 - $1; ja[n] = $5 - $1 }
  END {
    printf "vitreg dense, windowed grid only: %.2f s, plain 2044 px forward (grid only): %.2f s (medians), peak RSS %d MB\n", median(g, n), median(p, n), kb[1] / 1024
    printf "  + bilinear to 2044x2044 f16: adds %.2f s = %.3fx the windowed forward, %.3fx the plain forward (paired medians), peak RSS %d MB\n", median(ba, n), median(bw, n), median(bp, n), kb[2] / 1024
    printf "  + jbu      to 2044x2044 f16: adds %.2f s = %.3fx the windowed forward, %.3fx the plain forward (paired medians), peak RSS %d MB\n", median(ja, n), median(jw, n), median(jp, n), kb[3] / 1024
  }' "$tmp/rounds"
