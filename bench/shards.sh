#!/usr/bin/env bash
# Web-scale extraction: `vitreg extract` from webdataset tar shards, from the same JPEGs in a folder,
# and the PyTorch pipeline a user would write for the shards, on the same random-weight ViT-S/14 reg4
# at 224 px, the same cores, in one run. Not a test: run it by hand on a quiet machine.
#   bench/shards.sh [WORKDIR]       (default /tmp/vitreg-shards)
# Environment: VITREG (the binary; default build/apps/vitreg), N (images, 10000), SHARDS (10),
# THREADS (2), BATCH (8), ROUNDS (1: every command once; more rounds alternate the order and quote
# the median), PEER_SHARDS (the peer reads the first this many shards; default all: its rate is
# images/s over what it read), REPORT_ONLY (1: print the last run's report again, timing nothing).
# The set (bench/shards_make.py, made once per WORKDIR): N JPEGs of 500x375, crops, flips and colour
# jitter of the shipped photos, in SHARDS tar shards (KEY.jpg, KEY.json, KEY.txt) and, the same
# bytes, in a folder. The peer (bench/shards_peer.py): tarfile + PIL + torchvision's eval transform
# in a DataLoader with THREADS workers, the model in PyTorch with torch.set_num_threads(THREADS).
# Needs Debian's python3-torch, python3-torchvision, python3-pil, python3-numpy, libopenblas0-pthread.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/bench
work=${1:-/tmp/vitreg-shards}
n=${N:-10000}; shards=${SHARDS:-10}; peer_shards=${PEER_SHARDS:-$shards}; threads=${THREADS:-2}; batch=${BATCH:-8}; rounds=${ROUNDS:-1}
vitreg=${VITREG:-$root/build/apps/vitreg}
peers=$root/../shared/peers
py=/usr/bin/python3
[[ -x "$vitreg" ]] || { echo "bench/shards.sh: no vitreg binary at $vitreg (build it, or set VITREG)" >&2; exit 1; }
[[ -f "$peers/make_model.py" ]] || { echo "bench/shards.sh: $peers/make_model.py not found" >&2; exit 1; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
log=$work/log.txt; : >"$log"
# Debian's torch calls whichever BLAS libblas.so.3 names: OpenBLAS, pinned to the thread count (it
# ignores torch.set_num_threads) and free to pick its kernels for this CPU (no OPENBLAS_CORETYPE)
dpkg -s libopenblas0-pthread >/dev/null 2>&1 || apt-get install -y -q libopenblas0-pthread >/dev/null
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

# --- the model (make_model.py writes the safetensors; the peer rebuilds it from the same seed)
stem=$($py "$peers/make_model.py" "$work" --size small --registers 4 --image 224 --reuse 2>>"$log" | tail -1)
model=$stem.safetensors
[[ -f "$model" ]] || { echo "bench/shards.sh: make_model.py made no model (see $log)" >&2; exit 1; }

# --- the set, made once for these arguments
set_dir=$work/set
stamp="$n $shards $(md5sum <"$bench/shards_make.py" | cut -c1-32)"
if [[ "$(cat "$set_dir/.stamp" 2>/dev/null)" != "$stamp" ]]; then
  rm -rf "$set_dir"
  $py "$bench/shards_make.py" "$set_dir" --n "$n" --shards "$shards"
  echo "$stamp" >"$set_dir/.stamp"
fi
shard_files=("$set_dir"/shards/*.tar)

vit() {  # vit OUT INPUT... : extract with the stage shares into OUT.progress
  local out=$1; shift
  rm -rf "$out"
  "$vitreg" extract "$model" "$@" -o "$out" --threads "$threads" --batch "$batch" --progress 2>"$out.progress" &&
    grep -q '"failed": 0' "$out/run.json"  # a skipped image would inflate images/s
}
peer() {  # peer [args...] -> its one line on stdout
  $py "$bench/shards_peer.py" "$peers/make_model.py" --workers "$threads" --threads "$threads" --batch "$batch" "$@" 2>>"$log"
}

# --- sanity: the peer's CLS features are vitreg's (same weights, same pixels up to resampling)
first=8  # the first shard's first images: keys 000000..000007, the folder's first files
files=("$set_dir"/folder/*.jpg)
printf '%s\n' "${files[@]:0:first}" >"$work/sanity.txt"
peer "${shard_files[0]}" --workers 1 --limit "$first" --save "$work/sanity-peer.npy" >/dev/null
vit "$work/sanity-vitreg" "@$work/sanity.txt"
sanity=$($py - "$work" <<'EOF'
import sys, numpy as np
w = sys.argv[1]
v, p = np.load(f"{w}/sanity-vitreg/cls.npy"), np.load(f"{w}/sanity-peer.npy")
assert v.shape == p.shape, (v.shape, p.shape)
cos = min(float(x @ y / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(v, p))
print(f"sanity ({len(v)} images, CLS): vitreg vs the PyTorch peer min cosine {cos:.6f}, "
      f"max rel diff {np.abs(v - p).max() / np.abs(p).max():.1e}")
sys.exit(0 if cos > 0.999 else 1)
EOF
) || { echo "$sanity"; echo "bench/shards.sh: vitreg and the peer disagree" >&2; exit 1; }

# --- timings: every command as a whole process (start-up, model load and exit included)
res=$work/times.txt
[[ -n "${REPORT_ONLY:-}" ]] && rounds=0 || : >"$res"  # REPORT_ONLY=1: the last run's report again
TIMEFORMAT='%R %U %S'
timed() {  # timed KEY CMD... : appends "KEY wall user sys" to $res
  local key=$1 t; shift
  t=$( { time "$@" >>"$log"; } 2>&1 ) || { echo "bench/shards.sh: '$key' failed; see $log" >&2; exit 1; }
  echo "$key $t" >>"$res"
}
load0=$(cut -d' ' -f1-3 /proc/loadavg)
variants=(shards folder peer)
for ((r = 0; r < rounds; r++)); do
  order=("${variants[@]}")
  ((r % 2)) && mapfile -t order < <(printf '%s\n' "${variants[@]}" | tac)
  for v in "${order[@]}"; do
    case $v in
      shards) timed shards vit "$work/out-shards" "${shard_files[@]}" ;;
      folder) timed folder vit "$work/out-folder" "$set_dir/folder" ;;
      peer) timed peer peer "${shard_files[@]:0:peer_shards}" ;;
    esac
  done
done

# the same features from the shards as from the folder, bit for bit
cmp -s "$work/out-shards/cls.npy" "$work/out-folder/cls.npy" && same=yes || same=NO

# --- report
med() { awk -v k="$1" '$1 == k { print $2 }' "$res" | sort -g |
  awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
cpu_s() { awk -v k="$1" '$1 == k { s += $3 + $4; c++ } END { printf "%.1f", s / c }' "$res"; }
stages() { tail -1 <(grep 'img/s' "$1.progress") | sed 's/.*img\/s  //'; }
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
vers=$($py -c 'import torch, torchvision, PIL; print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, Pillow {PIL.__version__}")')
ts=$(med shards); tf=$(med folder); tp=$(med peer)
echo "$sanity"
echo "features from the shards equal the folder's, bit for bit: $same"
echo
echo "CPU: $cpu ($(nproc) cores); $(date -u '+%Y-%m-%d %H:%M UTC'); load average before $load0, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "set: $n JPEGs of 500x375 in $shards shards ($(du -sh "$set_dir/shards" | cut -f1)); model $(basename "$stem") (fp32);"
echo "$threads threads, batch $batch; $rounds round(s), median; wall time of the whole process (start-up and model load included)"
echo "vitreg: $("$vitreg" --version 2>&1 | head -1); peer: $vers, DataLoader(num_workers=$threads)"
echo
echo "| input | wall s | images/s | CPU s | vitreg shards images/s / this | stages (share of the busy time; forward of the wall time) |"
echo "|---|---|---|---|---|---|"
awk -v n="$n" -v s="$shards" -v t="$ts" -v c="$(cpu_s shards)" -v st="$(stages "$work/out-shards")" 'BEGIN {
  printf "| vitreg extract, %s tar shards | %.1f | %.1f | %s | 1.00 | %s |\n", s, t, n / t, c, st }'
awk -v n="$n" -v t="$tf" -v ts="$ts" -v c="$(cpu_s folder)" -v st="$(stages "$work/out-folder")" 'BEGIN {
  printf "| vitreg extract, the same files in a folder | %.1f | %.1f | %s | %.2f | %s |\n", t, n / t, c, t / ts, st }'
peer_n=$(for f in "${shard_files[@]:0:peer_shards}"; do tar tf "$f"; done | grep -c '\.jpg$')
awk -v n="$n" -v pn="$peer_n" -v t="$tp" -v ts="$ts" -v c="$(cpu_s peer)" 'BEGIN {
  printf "| PyTorch: tarfile + PIL + torchvision in a DataLoader (%d images) | %.1f | %.1f | %s | %.2f | |\n",
    pn, t, pn / t, c, (n / ts) / (pn / t) }'
echo
echo "targets (issue #51): shards >= 1.0x the folder, >= 1.5x the peer, the forward >= 85% of the wall time"
