#!/usr/bin/env bash
# Folder throughput: `vitreg extract` against the pipeline its users run in Python — a PyTorch
# DataLoader (PIL loader, torchvision eval transform, num_workers = cores) feeding ONNX Runtime fp32 —
# on the same random-weight ViT, the same cores and the same folders of camera-size JPEGs, in one run.
#   bench/photos.sh [WORKDIR] [MODEL_SIZE]      (defaults: /tmp/vitreg-photos, small = ViT-S/14 reg4, 224 px)
# Environment: VITREG (the binary; default build/apps/vitreg, built if missing), THREADS (default: all
# cores), BATCH (8), ROUNDS (3), N12 / N2 / N640 (files per folder: 24 / 48 / 48).
# Needs Debian's python3-torch, python3-torchvision, python3-pil, python3-numpy, and node + npm
# (onnxruntime-node@1.30.0 from the npm registry is installed into WORKDIR once).
#
# Every command is timed as a whole process (start-up, model load and exit included), ROUNDS times,
# the variants of one folder in turn and in the reverse order every other round; the median is quoted.
# Each folder is also run on its first image alone, and "after start-up" divides the images beyond the
# first by the time beyond that one-image run: the rate a long folder approaches.
# vitreg writes into a new output folder each run (it resumes what an output folder holds otherwise).
# `--decode draft` (JPEG decoded at a reduced DCT scale, as PIL's Image.draft) is timed too when
# `vitreg extract --help` offers it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/bench
work=${1:-/tmp/vitreg-photos}; size=${2:-small}
n12=${N12:-24}; n2=${N2:-48}; n640=${N640:-48}
rounds=${ROUNDS:-3}; batch=${BATCH:-8}; threads=${THREADS:-$(nproc)}
peers="$root/../shared/peers"
py=/usr/bin/python3
t_start=$SECONDS
mkdir -p "$work"
work=$(cd "$work" && pwd)
[[ -f "$peers/make_model.py" ]] || { echo "bench/photos.sh: $peers/make_model.py not found" >&2; exit 1; }

# --- vitreg: $VITREG, else the build's binary, built when missing (retried: the tree may be mid-edit)
vitreg=${VITREG:-}
if [[ -z "$vitreg" ]]; then
  for c in "$root/build/apps/vitreg/vitreg" "$root/build/apps/vitreg"; do
    [[ -f "$c" && -x "$c" ]] && { vitreg=$c; break; }
  done
fi
if [[ -z "$vitreg" ]]; then
  for try in 1 2 3; do
    "$root/scripts/build.sh" vitreg >"$work/build.log" 2>&1 && break
    echo "bench/photos.sh: build failed (try $try of 3, see $work/build.log); retrying in 60 s" >&2
    sleep 60
  done
  for c in "$root/build/apps/vitreg/vitreg" "$root/build/apps/vitreg"; do
    [[ -f "$c" && -x "$c" ]] && { vitreg=$c; break; }
  done
  [[ -n "$vitreg" ]] || { echo "bench/photos.sh: no vitreg binary after building" >&2; exit 1; }
fi
draft=0
if "$vitreg" extract --help 2>&1 | grep -A3 -e '--decode' | grep -q draft; then draft=1; fi

# --- the peers: Debian's PyTorch / torchvision / Pillow, ONNX Runtime from npm
if ! $py -c 'import torch, torchvision, PIL, numpy' 2>/dev/null; then
  apt-get install -y -q python3-torch python3-torchvision python3-pil python3-numpy >/dev/null
fi
if [[ ! -d "$work/node_modules/onnxruntime-node" ]]; then
  (cd "$work" && npm init -y >/dev/null && npm install --ignore-scripts onnxruntime-node@1.30.0 >/dev/null 2>&1)
fi
export ORT_HOME=$work

# --- the model (same weights as .safetensors and .onnx) and the folders
stem=$($py "$peers/make_model.py" "$work" --size "$size" --registers 4 --image 224 --reuse 2>/dev/null | tail -1)
[[ -f "$stem.safetensors" && -f "$stem.onnx" ]] || { echo "bench/photos.sh: make_model.py made no model" >&2; exit 1; }
photos=$work/photos
stamp="$n12 $n2 $n640 $(md5sum <"$bench/photos_folder.py" | cut -c1-32)"
if [[ "$(cat "$photos/.stamp" 2>/dev/null)" != "$stamp" ]]; then
  rm -rf "$photos"
  $py "$bench/photos_folder.py" "$photos" --n12 "$n12" --n2 "$n2" --n640 "$n640"
  echo "$stamp" >"$photos/.stamp"
fi
folders=(12mp 2mp 640x480)
declare -A count=([12mp]=$n12 [2mp]=$n2 [640x480]=$n640)
for f in "${folders[@]}"; do files=("$photos/$f"/*.jpg); echo "${files[0]}" >"$work/first-$f.txt"; done

log=$work/log.txt; : >"$log"
# vit OUT INPUT [extra args]; peer INPUT_FOLDER [extra photos_peer.py args] (-> stdout: its one line)
vit() {
  local out=$1 in=$2; shift 2
  rm -rf "$out"
  "$vitreg" extract "$stem.safetensors" "$in" -o "$out" --threads "$threads" --batch "$batch" "$@" >>"$log" 2>&1 &&
    grep -q '"failed": 0' "$out/run.json"  # a skipped image would inflate images/s
}
peer() {
  local in=$1; shift
  $py "$bench/photos_peer.py" "$in" --batch "$batch" --workers "$threads" "$@" 2>>"$log" |
    node "$bench/photos_peer.js" "$stem.onnx" --threads "$threads" >>"$log" 2>&1
}

# --- sanity: ONNX Runtime behind the DataLoader (batches of 2, through the workers) gives what a direct
# run of each image (batch 1, no workers) gives, and vitreg's CLS features agree with both
files=("$photos/12mp"/*.jpg); printf '%s\n' "${files[@]:0:4}" >"$work/sanity.txt"
$py "$bench/photos_peer.py" "$photos/12mp" --limit 4 --batch 2 --workers "$threads" 2>>"$log" |
  node "$bench/photos_peer.js" "$stem.onnx" --threads "$threads" --save "$work/sanity-loader.bin" >>"$log" 2>&1
$py "$bench/photos_peer.py" "$photos/12mp" --limit 4 --direct 2>>"$log" |
  node "$bench/photos_peer.js" "$stem.onnx" --threads "$threads" --save "$work/sanity-direct.bin" >>"$log" 2>&1
vit "$work/sanity-vitreg" "@$work/sanity.txt"
sanity=$($py - "$work" <<'EOF'
import sys, numpy as np
w = sys.argv[1]
v = np.load(f"{w}/sanity-vitreg/cls.npy")
a = np.fromfile(f"{w}/sanity-loader.bin", np.float32).reshape(-1, v.shape[1])
d = np.fromfile(f"{w}/sanity-direct.bin", np.float32).reshape(-1, v.shape[1])
assert a.shape == d.shape == v.shape, (a.shape, d.shape, v.shape)
ld = np.abs(a - d).max() / np.abs(d).max()
cos = min(float(x @ y / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(v, a))
vd = np.abs(v - a).max() / np.abs(a).max()
ok = ld < 1e-4
print(f"sanity ({len(v)} 12 MP images, CLS): DataLoader+ORT vs direct ORT max rel diff {ld:.1e}"
      f" ({'ok' if ok else 'MISMATCH'}); vitreg vs ORT min cosine {cos:.6f}, max rel diff {vd:.1e}"
      f"{'' if cos > 0.999 else ' (WARNING: vitreg and the peer disagree)'}")
sys.exit(0 if ok else 1)
EOF
) || { echo "$sanity"; echo "bench/photos.sh: the peer pipeline does not match a direct ONNX Runtime run" >&2; exit 1; }

# --- timings: ROUNDS rounds; in each, every folder's variants in turn (reversed every other round)
res=$work/times.txt; : >"$res"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }  # jiffies, all cores
busy0=$(busy); wall0=$EPOCHREALTIME
TIMEFORMAT='%R %U %S'
timed() {  # timed KEY CMD... : appends "KEY wall user sys" to $res
  local key=$1; shift
  local t
  t=$( { time "$@" >/dev/null; } 2>&1 ) || { echo "bench/photos.sh: '$key' failed; see $log" >&2; tail -5 "$log" >&2; exit 1; }
  echo "$key $t" >>"$res"
}
variants=(exact peer); ((draft)) && variants=(exact draft peer)
run_variant() {  # run_variant FOLDER VARIANT N|1
  local f=$1 v=$2 n=$3 in
  if [[ $n == 1 ]]; then in=@$work/first-$f.txt; else in=$photos/$f; fi
  case $v in
    exact) timed "$f $v $n" vit "$work/out" "$in" ;;
    draft) timed "$f $v $n" vit "$work/out" "$in" --decode draft ;;
    peer)
      if [[ $n == 1 ]]; then timed "$f $v $n" peer "$photos/$f" --limit 1
      else timed "$f $v $n" peer "$photos/$f"; fi ;;
  esac
}
for ((r = 0; r < rounds; r++)); do
  order=("${variants[@]}")
  ((r % 2)) && mapfile -t order < <(printf '%s\n' "${variants[@]}" | tac)
  for f in "${folders[@]}"; do
    for v in "${order[@]}"; do run_variant "$f" "$v" "${count[$f]}"; run_variant "$f" "$v" 1; done
  done
done

busy1=$(busy); wall1=$EPOCHREALTIME
# --- report
# what the rest of the machine did meanwhile: all cores' busy time less the timed commands' own
others=$(awk -v b0="$busy0" -v b1="$busy1" -v hz="$(getconf CLK_TCK)" -v w0="$wall0" -v w1="$wall1" -v c="$(nproc)" '
  { own += $5 + $6 } END { o = (b1 - b0) / hz - own; if (o < 0) o = 0
    printf "%.0f cpu-s of %.0f (%.0f%%)", o, (w1 - w0) * c, 100 * o / ((w1 - w0) * c) }' "$res")
med() {  # med FOLDER VARIANT N [cpu] -> median wall seconds (cpu: user + sys seconds)
  awk -v k="$1 $2 $3" -v c="${4:-}" '$1" "$2" "$3 == k { print c ? $5 + $6 : $4 }' "$res" | sort -g |
    awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
vers=$($py -c 'import torch, torchvision, PIL; print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, Pillow {PIL.__version__}")')
ortv=$(node -e "console.log(require('$work/node_modules/onnxruntime-node/package.json').version)")
echo "$sanity"
echo
echo "other processes on the machine during the timings: $others (a busy neighbour slows the wall-clock tables)"
echo "model: $(basename "$stem") (fp32, same weights in both); $threads threads, batch $batch; median of $rounds rounds"
echo "CPU: $cpu ($(nproc) cores); $(date -u '+%Y-%m-%d %H:%M UTC'); load average before the timings $load0, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "vitreg: $("$vitreg" --version 2>&1 | head -1) ($vitreg)$( ((draft)) || echo '; --decode draft: not offered by this build')"
echo "peer: DataLoader(num_workers=$threads) with PIL Image.open().convert('RGB') + Resize(256, BICUBIC), CenterCrop(224),"
echo "      ToTensor, Normalize(ImageNet) [$vers] -> ONNX Runtime $ortv (node $(node --version), intra-op $threads)"
echo
hdr='| folder | images | vitreg images/s (exact)'
sep='|---|---|---'
((draft)) && { hdr+=' | vitreg images/s (draft)'; sep+='|---'; }
hdr+=' | DataLoader + ORT images/s | vitreg / peer (exact)'; sep+='|---|---'
((draft)) && { hdr+=' | vitreg / peer (draft)'; sep+='|---'; }
table() {  # table whole|steady
  echo "$hdr |"; echo "$sep|"
  for f in "${folders[@]}"; do
    local n=${count[$f]} row=() v
    for v in "${variants[@]}"; do row+=("$(med "$f" "$v" "$n")" "$(med "$f" "$v" 1)"); done
    awk -v mode="$1" -v f="$f" -v n="$n" -v d="$draft" -v r="${row[*]}" 'BEGIN {
      split(r, t, " ")  # exact N, exact 1, [draft N, draft 1,] peer N, peer 1
      k = d ? 3 : 2
      for (i = 1; i <= k; i++) rate[i] = mode == "whole" ? n / t[2 * i - 1] : (n - 1) / (t[2 * i - 1] - t[2 * i])
      s = sprintf("| %s | %d | %.2f", f, n, rate[1])
      if (d) s = s sprintf(" | %.2f", rate[2])
      s = s sprintf(" | %.2f | %.2f", rate[k], rate[1] / rate[k])
      if (d) s = s sprintf(" | %.2f", rate[2] / rate[k])
      print s " |" }'
  done
}
echo "whole run (start-up, model load and exit included):"
table whole
echo
echo "after start-up (images beyond the first / time beyond a one-image run):"
table steady
echo
echo "CPU seconds per image (user + sys of all processes, whole run; neighbours on the machine do not move it):"
chdr='| folder | images | vitreg (exact)'; csep='|---|---|---'
((draft)) && { chdr+=' | vitreg (draft)'; csep+='|---'; }
echo "$chdr | DataLoader + ORT | peer / vitreg (exact) |"; echo "$csep|---|---|"
for f in "${folders[@]}"; do
  n=${count[$f]}
  awk -v f="$f" -v n="$n" -v d="$draft" -v e="$(med "$f" exact "$n" cpu)" -v p="$(med "$f" peer "$n" cpu)" \
      -v q="$( ((draft)) && med "$f" draft "$n" cpu)" 'BEGIN {
    s = sprintf("| %s | %d | %.3f", f, n, e / n)
    if (d) s = s sprintf(" | %.3f", q / n)
    printf "%s | %.3f | %.2f |\n", s, p / n, p / e }'
done
if ((draft)); then
  awk -v a="$(med 12mp draft "$n12")" -v a1="$(med 12mp draft 1)" -v b="$(med 640x480 exact "$n640")" \
      -v b1="$(med 640x480 exact 1)" -v na="$n12" -v nb="$n640" 'BEGIN {
    printf "\ndraft 12 MP / exact 640x480, time per image: %.2fx whole run, %.2fx after start-up (target <= 1.25x)\n",
      (a / na) / (b / nb), ((a - a1) / (na - 1)) / ((b - b1) / (nb - 1)) }'
fi
echo
echo "raw times (folder variant images wall user sys): $res; took $((SECONDS - t_start)) s"
rm -rf "$work/out"
