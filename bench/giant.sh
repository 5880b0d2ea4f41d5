#!/usr/bin/env bash
# The largest models on one CPU (issue #52): vitreg at fp32, @bf16, @int8 and @int4 on
# random-weight checkpoints in the upstreams' torch hub layouts, with PyTorch and ONNX Runtime
# on the same files in the same run.
#   bench/giant.sh      (SCALE=small bench/giant.sh: the same tensor names at a tiny width, a few minutes)
# It writes each model as bf16 safetensors (bench/giant_model.py, one tensor at a time) and says
# so, then deletes each once measured (KEEP=1 keeps them):
#   DINOv3 ViT-7B/16 (dinov3_vit7b16, 13.4 GB), DINOv2 ViT-g/14 reg4 (dinov2_vitg14_reg4, 2.3 GB),
#   DINOv2 ViT-L/14 reg4 (dinov2_vitl14_reg4, 0.6 GB: the fp32 ratios).
# For each model, precision, size (224 and 518 px; 224 and 512 for patch 16) and batch (1, 4), on
# 2 threads, `vitreg bench` gives s/image, the peak RSS through the timed forwards (and the
# process's, which adds the fp32 model loaded for the error), the load time against
# `cat FILE > /dev/null` from a warm page cache, the share of the measured peak (`--peak`, at
# PEAK_PX and the largest batch only: the forward's share of the FMA peak at fp32, the linear
# layers' share of their instruction's peak otherwise) and the CLS / mean patch cosine to fp32
# where fp32 fits. Also `vitreg info`'s time and RSS per file, the 7B's fp32 refusal with its
# estimate, and each model converted to an int8 and an int4 file (`vitreg convert`: time, peak
# RSS) and loaded from it (against `cat` of that file).
# Peers, each under the memory cap (killed there: out of memory is a result): PyTorch (Debian
# torch 1.13) fp32 and bf16 on a compact ViT read from the same file; ONNX Runtime (npm
# onnxruntime-node 1.30) fp32 and its dynamic int8 (shared/peers/ort_int8.py) on ViT-L only.
# Prints one markdown table for vitreg, one for the peers and the issue's targets beside the
# measured numbers, with the CPU model and the date.
# Environment: SCALE=full|small; WORK (default /tmp/vitreg-giant: 14 GB of disk at full size, one
# model at a time; KEEP=1 keeps all three, 16.3 GB, and ViT-L's ONNX graphs, about 3 GB);
# MODELS (names above); PXS ("224 518"); BATCHES ("1 4"); ITERS (2); WARMUP (1); PEAK_PX (224);
# CAP_MB (default 85% of the available memory: every process is killed past it); VITREG
# (default build/apps/vitreg, built if missing). Needs python3-numpy, python3-torch,
# python3-onnx and libopenblas0-pthread (Debian; installed where missing), node and npm, and
# ../shared/peers (ort_bench.js, ort_int8.py).
# At full size the 7B's forwards take minutes each: the whole run takes hours.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scale=${SCALE:-full}; work=${WORK:-/tmp/vitreg-giant}; keep=${KEEP:-0}
models=${MODELS:-dinov3_vit7b16 dinov2_vitg14_reg4 dinov2_vitl14_reg4}
pxs=${PXS:-224 518}; batches=${BATCHES:-1 4}; iters=${ITERS:-2}; warmup=${WARMUP:-1}; peak_px=${PEAK_PX:-224}
threads=2
available_mb=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
cap=${CAP_MB:-$((available_mb * 85 / 100))}
vitreg=${VITREG:-$root/build/apps/vitreg}
py=/usr/bin/python3
model_py="$root/bench/giant_model.py"
peers="$root/../shared/peers"
[[ -f "$peers/ort_bench.js" ]] || { echo "bench/giant.sh: $peers/ort_bench.js not found" >&2; exit 1; }
[[ "$scale" == full || "$scale" == small ]] || { echo "bench/giant.sh: SCALE must be full or small" >&2; exit 1; }
[[ -x "$vitreg" ]] || "$root/scripts/build.sh" vitreg >/dev/null
mkdir -p "$work"
written=()
cleanup() {
  if [[ "$keep" == 1 ]]; then echo "kept in $work: ${written[*]:-nothing}" >&2; return; fi
  if ((${#written[@]})); then rm -f "${written[@]}"; echo "deleted ${written[*]}" >&2; fi
}
trap cleanup EXIT
log() { echo "giant.sh: $*" >&2; }
measure() { "$py" "$root/bench/peak_rss.py" "$cap" "$@"; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2" | tail -1; }
now() { date +%s.%N; }
gb() { awk -v m="$1" 'BEGIN { printf (m == "" ? "–" : "%.2f"), m / 1024 }'; }
patch_of() { [[ "$1" == dinov3_* ]] && echo 16 || echo 14; }
"$py" -c 'import torch, numpy' 2>/dev/null || apt-get install -y -q python3-torch python3-numpy >/dev/null
"$py" -c 'import onnx' 2>/dev/null || apt-get install -y -q python3-onnx >/dev/null
# Debian's torch takes its fp32 products from the system BLAS: the reference one unless OpenBLAS
# is installed (as shared/peers/run-peers.sh installs it), 20-50x slower.
dpkg -s libopenblas0-pthread >/dev/null 2>&1 || apt-get install -y -q libopenblas0-pthread >/dev/null
ort_ok=1
if [[ ! -d "$work/node_modules/onnxruntime-node" ]]; then
  (cd "$work" && npm init -y >/dev/null && npm install --ignore-scripts onnxruntime-node@1.30.0 >/dev/null 2>&1) || ort_ok=0
fi

rows=(); peer_rows=(); info_rows=(); quant_rows=(); notes=(); targets=()
declare -A speed peakmb  # "model prec px batch" -> s/image, timed peak MB (vitreg); "peer model prec px batch" -> s/image

# bench_case MODEL FILE PREC PX BATCH EXTRA...: one `vitreg bench`, one table row. Returns 2
# where the precision was refused before loading (the message kept in $refusal).
bench_case() {
  local model=$1 file=$2 prec=$3 px=$4 b=$5; shift 5
  local spec=$file peak=()
  [[ "$prec" == fp32 ]] || spec="$file@$prec"
  [[ "$px" == "$peak_px" && "$b" == "${batches##* }" ]] && peak=(--peak)
  local out
  out=$(measure "$vitreg" bench "$spec" --threads "$threads" --batch "$b" --size "${px}x${px}" --iters "$iters" \
    --warmup "$warmup" "${peak[@]}" "$@" -q 2>&1) || true
  local state; state=$(field status "$out")
  if [[ "$state" != ok ]] && grep -q "^vitreg: .*nothing was loaded" <<<"$out"; then
    refusal=$(grep -m1 "^vitreg: .*nothing was loaded" <<<"$out" | sed 's/^vitreg: //'); return 2
  fi
  local ms load timed share cos
  ms=$(sed -n 's/.*: \([0-9.]*\) ms\/image median.*/\1/p' <<<"$out" | head -1)
  load=$(sed -n 's/^  load \([0-9.]*\) s; peak RSS.*/\1/p' <<<"$out")
  timed=$(sed -n 's/^  load .* s; peak RSS \([0-9]*\) MB through.*/\1/p' <<<"$out")
  if [[ "$prec" == fp32 ]]; then
    share=$(sed -n 's/^forward: \([0-9]*%\) of .*/forward \1 of FMA/p' <<<"$out")
  else
    share=$(grep "^linear layers, $prec" <<<"$out" | sed -n "s/.*= \([0-9]*%\) of its instruction's peak.*/linears \1/p")
    [[ -n "$share" ]] && share="$share of $(grep "^linear layers, $prec" <<<"$out" | sed -n 's/.*(kernels \([^)]*\)).*/\1/p')"
  fi
  cos=$(sed -n 's/.*CLS cosine \([0-9.]*\) .*patch cosine \([0-9.]*\) mean.*/\1 \/ \2/p' <<<"$out")
  grep -q "vs fp32: not measured" <<<"$out" && cos="not measured: fp32 does not fit beside it"
  [[ "$prec" == fp32 ]] && cos="(reference)"
  if [[ "$state" != ok || -z "$ms" ]]; then
    rows+=("| $model | $px | $b | $prec | failed ($state): $(grep -m1 vitreg: <<<"$out" | cut -c1-160) | | | | | | | |")
    return 1
  fi
  speed["$model $prec $px $b"]=$(awk -v m="$ms" 'BEGIN { printf "%.4f", m / 1000 }')
  peakmb["$model $prec $px $b"]=$timed
  local row
  row="| $model | $px | $b | $prec | ${speed["$model $prec $px $b"]} | $(gb "$timed") | $(gb "$(field peak_rss_mb "$out")") |"
  row+=" $load | $cat_s | $(awk -v l="$load" -v c="$cat_s" 'BEGIN { if (c > 0) printf "%.2f", l / c; else printf "–" }') |"
  rows+=("$row ${share:-–} | ${cos:-–} |")
}

# quantized_case MODEL FILE DTYPE PX: `vitreg convert --dtype DTYPE` of the bf16 file (time, peak
# RSS), then one `vitreg bench` of the quantized file at PX, batch 1: its load against `cat` of it
# (int8 files run in place where the CPU allows: --file-weights mapped, the default). One row.
quantized_case() {
  local model=$1 file=$2 dtype=$3 px=$4 qfile="$work/$1-$3.safetensors" t0 out conv_s conv_mb qcat load ms timed held
  written+=("$qfile")
  t0=$(now); out=$(measure "$vitreg" convert "$file" "$qfile" --dtype "$dtype" -q 2>&1) || true
  conv_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'); conv_mb=$(field peak_rss_mb "$out")
  if [[ "$(field status "$out")" != ok ]]; then
    quant_rows+=("| $model | $dtype | failed ($(field status "$out")): $(grep -m1 vitreg: <<<"$out" | cut -c1-120) | | | | | | | | |")
    return
  fi
  cat "$qfile" >/dev/null
  t0=$(now); cat "$qfile" >/dev/null; qcat=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  out=$(measure "$vitreg" bench "$qfile@$dtype" --threads "$threads" --batch 1 --size "${px}x${px}" --iters "$iters" \
    --warmup "$warmup" 2>&1) || true
  ms=$(sed -n 's/.*: \([0-9.]*\) ms\/image median.*/\1/p' <<<"$out" | head -1)
  load=$(sed -n 's/^  load \([0-9.]*\) s; peak RSS.*/\1/p' <<<"$out")
  timed=$(sed -n 's/^  load .* s; peak RSS \([0-9]*\) MB through.*/\1/p' <<<"$out")
  held=$(sed -n 's/.*linear weights \(.*\)$/\1/p' <<<"$out")
  local row="| $model | $dtype | $conv_s | $(gb "$conv_mb") | $(stat -c %s "$qfile" | awk '{ printf "%.2f", $1 / 1e9 }') | $qcat"
  row+=" | ${load:-–} | $(awk -v l="$load" -v c="$qcat" 'BEGIN { if (l != "" && c > 0) printf "%.2f", l / c; else printf "–" }')"
  quant_rows+=("$row | $(awk -v m="$ms" 'BEGIN { printf (m == "" ? "–" : "%.4f"), m / 1000 }') | $(gb "$timed") | ${held:-–} |")
  [[ "$keep" == 1 ]] || { rm -f "$qfile"; log "deleted $qfile"; }
}

# torch_peer MODEL FILE PREC PXLIST BATCHLIST: one process for every size and batch.
torch_peer() {
  local model=$1 file=$2 prec=$3 pxl=$4 bl=$5
  local out state
  out=$(measure env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads "$py" "$model_py" torch \
    "$model" "$file" --precision "$prec" --px "$pxl" --batch "$bl" --iters "$iters" --warmup "$warmup" --threads "$threads" \
    --scale "$scale" 2>/dev/null) || true
  state=$(field status "$out")
  local peak; peak=$(gb "$(field peak_rss_mb "$out")")
  local load; load=$(sed -n "s/^torch $prec load: \([0-9.]*\) s.*/\1/p" <<<"$out")
  local px b s
  for px in ${pxl//,/ }; do
    for b in ${bl//,/ }; do
      s=$(sed -n "s/^torch $prec $px $b: \([0-9.]*\) s\/image/\1/p" <<<"$out")
      speed["torch $model $prec $px $b"]=$s
      [[ -n "$s" ]] || s=$([[ "$state" == over-cap ]] && echo "out of memory (killed at $cap MB)" || echo "failed ($state)")
      peer_rows+=("| PyTorch | $model | $px | $b | $prec | $s | $peak (process) | ${load:-–} |")
    done
  done
}

# ort_peer MODEL FILE PXLIST: ViT-L's fp32 graph per size, and ORT's dynamic int8 of it.
ort_peer() {
  local model=$1 file=$2 pxl=$3 px b g s out
  measure "$py" "$model_py" onnx "$model" "$file" "$work" --px "$pxl" --scale "$scale" >/dev/null 2>"$work/onnx.log" ||
    { peer_rows+=("| ONNX Runtime | $model | | | fp32 | export failed: $(tail -1 "$work/onnx.log") | | |"); return; }
  for px in ${pxl//,/ }; do
    written+=("$work/$model-$px.onnx" "$work/$model-int8-$px.onnx")
    "$py" "$peers/ort_int8.py" "$work/$model-$px.onnx" "$work/$model-int8-$px.onnx" >/dev/null
    for b in ${batches}; do
      for g in fp32 int8; do
        local graph="$work/$model-$px.onnx"
        [[ "$g" == int8 ]] && graph="$work/$model-int8-$px.onnx"
        out=$(ORT_HOME=$work measure node "$peers/ort_bench.js" "$graph" "$threads" "$b" "$iters" 2>&1) || true
        s=$(sed -n 's/.*: \([0-9.]*\) ms\/image.*/\1/p' <<<"$out" | awk '{ printf "%.4f", $1 / 1000 }')
        speed["ort $model $g $px $b"]=$s
        local state; state=$(field status "$out")
        [[ -n "$s" ]] || s=$([[ "$state" == over-cap ]] && echo "out of memory (killed at $cap MB)" || echo "failed ($state)")
        peer_rows+=("| ONNX Runtime | $model | $px | $b | $g | $s | $(gb "$(field peak_rss_mb "$out")") | – |")
      done
    done
  done
}

# SCALE=small: a --max-memory per precision that refuses fp32, and the fp32 comparison beside the
# others, as 24 GB does to the full 7B: just under fp32's estimate for fp32; the precision's own
# estimate + the fp32 weights (less 2 MB) for the others. From the estimates of the refusal.
small_7b_cap() {
  local est; est=$("$vitreg" bench "$1" --max-memory 1M -q 2>&1 || true)
  local f32w; f32w=$(sed -n 's/.* at fp32 needs about [0-9]* MB (weights \([0-9]*\) MB.*/\1/p' <<<"$est")
  sed -n "s/.*By precision: .*\b$2 \([0-9]*\) MB.*/\1/p" <<<"$est" |
    awk -v p="$2" -v w="$f32w" '{ print (p == "fp32" ? $1 - 1 : $1 + w - 2) "M" }'
}

for model in $models; do
  file="$work/$model.safetensors"
  log "writing $model ($scale)"
  written+=("$file")
  "$py" "$model_py" write "$model" "$file" --scale "$scale" >&2
  notes+=("$(basename "$file"): $(stat -c %s "$file" | awk '{ printf "%.3f GB", $1 / 1e9 }') of random bf16 weights")
  cat "$file" >/dev/null  # warm the page cache
  t0=$(now); cat "$file" >/dev/null; cat_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  t0=$(now); "$vitreg" info "$file" -q >/dev/null 2>&1 || true
  info_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  out=$(measure "$vitreg" info "$file" -q 2>&1) || true
  row="| $model | $(stat -c %s "$file" | awk '{ printf "%.3f", $1 / 1e9 }') | $(sed -n 's/^parameters *//p' <<<"$out") |"
  info_rows+=("$row $info_s | $(field peak_rss_mb "$out") | $(field status "$out") | $cat_s |")
  small_caps=()
  p=$(patch_of "$model"); sizes=()
  for px in $pxs; do sizes+=($((px / p * p))); done
  for prec in fp32 bf16 int8 int4; do
    extra=()
    if [[ "$scale" == small && "$model" == dinov3_vit7b16 ]]; then
      extra=(--max-memory "$(small_7b_cap "$file" "$prec")"); small_caps+=("$prec ${extra[1]}")
    fi
    for px in "${sizes[@]}"; do
      for b in $batches; do
        log "$model $prec ${px} px batch $b"
        rc=0; bench_case "$model" "$file" "$prec" "$px" "$b" "${extra[@]}" || rc=$?
        if ((rc == 2)); then
          rows+=("| $model | | | $prec | refused before loading: $refusal | | | | | | | |")
          [[ "$model" == dinov3_vit7b16 && "$prec" == fp32 ]] && seven_b_refusal=$refusal
          break 2
        fi
      done
    done
  done
  for dtype in int8 int4; do log "$model $dtype file"; quantized_case "$model" "$file" "$dtype" "${sizes[0]}"; done
  ((${#small_caps[@]})) && notes+=("SCALE=small: $model runs with --max-memory ${small_caps[*]}: fp32 refused, and the fp32 comparison beside the others, as at full size")
  pxl=$(IFS=,; echo "${sizes[*]}"); bl=$(echo $batches | tr ' ' ,)
  for prec in fp32 bf16; do log "$model PyTorch $prec"; torch_peer "$model" "$file" "$prec" "$pxl" "$bl"; done
  fp32_graph=$(stat -c %s "$file" | awk '{ printf "%.2f GB", 2 * $1 / 1e9 }')
  if [[ "$model" == dinov2_vitl14_reg4 && "$ort_ok" == 1 ]]; then
    log "$model ONNX Runtime"; ort_peer "$model" "$file" "$pxl"
  elif [[ "$model" == dinov2_vitl14_reg4 ]]; then
    peer_rows+=("| ONNX Runtime | $model | | | fp32, int8 | not run: npm could not install onnxruntime-node | | |")
  elif [[ "$model" == dinov3_vit7b16 ]]; then
    peer_rows+=("| ONNX Runtime | $model | | | fp32, int8 | out of memory / not attempted: the fp32 graph is $fp32_graph (ORT quantizes from it) | | |")
  else
    peer_rows+=("| ONNX Runtime | $model | | | fp32, int8 | not attempted: the fp32 graph ($fp32_graph) is exported for ViT-L only | | |")
  fi
  if [[ "$keep" != 1 ]]; then  # the disk holds one model at a time
    rm -f "$file"; left=(); for f in "${written[@]}"; do [[ "$f" == "$file" ]] || left+=("$f"); done; written=("${left[@]}")
    log "deleted $file"
  fi
done

# The issue's targets beside what was measured (at SCALE=small only the form is checked).
max_peak() { local k m=0; for k in "${!peakmb[@]}"; do [[ "$k" == "$1 "* ]] && m=$(awk -v a="$m" -v b="${peakmb[$k]}" 'BEGIN { print (b > a ? b : a) }'); done; echo "$m"; }
verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v > 0 && v <= t) ? "met" : (v > 0 ? "not met" : "not measured") }'; }
for pair in "bf16 15" "int8 8" "int4 4.5"; do
  read -r prec limit <<<"$pair"
  m=$(max_peak "dinov3_vit7b16 $prec")
  targets+=("| ViT-7B @$prec peak RSS ≤ $limit GB | $(gb "$m") GB | $(verdict "$(gb "$m")" "$limit") |")
done
for row in "${quant_rows[@]}"; do  # the load target, met where a file runs where it lies
  IFS='|' read -r _ m d _ _ _ c l r _ <<<"$row"
  [[ "${m// /}" == dinov3_vit7b16 ]] || continue
  r=${r// /}; [[ "$r" == – ]] && r=0  # (cat too fast to time: SCALE=small)
  targets+=("| ViT-7B load ≤ 1.5× cat, ${d// /} file | ${l// /} s against ${c// /} s (${r}×) | $(verdict "$r" 1.5) |")
done
if [[ " $models " != *" dinov3_vit7b16 "* ]]; then  # not in MODELS: nothing to say either way
  targets+=("| ViT-7B fp32 refused before loading, with its estimate | – | not measured |")
else
  targets+=("| ViT-7B fp32 refused before loading, with its estimate | ${seven_b_refusal:-not refused} | $([[ -n "${seven_b_refusal:-}" ]] && echo met || echo "not met") |")
fi
for prec in fp32 bf16 int8; do
  for k in $(printf '%s\n' "${!speed[@]}" | tr ' ' '~' | sort -t~ -k3,3n -k4,4n); do
    k=${k//\~/ }
    [[ "$k" == "dinov2_vitl14_reg4 $prec "* ]] || continue
    case=${k#dinov2_vitl14_reg4 $prec }
    for peer in torch ort; do
      s=${speed["$peer dinov2_vitl14_reg4 $prec $case"]:-}
      [[ -n "$s" ]] || continue
      v=${speed[$k]}
      targets+=("| ViT-L $prec ${case/ / px, batch } ahead of $([[ $peer == torch ]] && echo PyTorch || echo ORT) | $v s against $s s ($(awk -v a="$v" -v b="$s" 'BEGIN { printf "%.2f×", a / b }')) | $(awk -v a="$v" -v b="$s" 'BEGIN { print a < b ? "met" : "not met" }') |")
    done
  done
done

cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
printf '\n## bench/giant.sh, %s, %s (%s cores, %s GB; %s threads used), SCALE=%s\n\n' "$(date -u +%F)" "$cpu" "$(nproc)" \
  "$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" "$threads" "$scale"
printf -- '- %s\n' "${notes[@]}"
printf -- '- every process killed past %s MB (CAP_MB); %s timed forwards after %s untimed\n' "$cap" "$iters" "$warmup"
printf '\n`vitreg info` (header only):\n\n| model | file GB | parameters | info s | info peak RSS MB | status | cat s |\n|---|---|---|---|---|---|---|\n'
printf '%s\n' "${info_rows[@]}"
printf '\nvitreg (peak RSS: through the timed forwards; process: with the fp32 model loaded for the cosine):\n\n'
printf '| model | px | batch | precision | s/image | peak RSS GB | process peak GB | load s | cat s | load / cat | peak share | cosine to fp32 (CLS / patch mean) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
printf '%s\n' "${rows[@]}"
printf '\nquantized files (`vitreg convert --dtype int8|int4` of the bf16 file, then the file at %s px, batch 1):\n\n' "${pxs%% *}"
printf '| model | dtype | convert s | convert peak RSS GB | file GB | cat s | load s | load / cat | s/image | peak RSS GB | linear weights |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
printf '%s\n' "${quant_rows[@]}"
printf '\npeers (same files, same run):\n\n| runtime | model | px | batch | precision | s/image | peak RSS GB | load s |\n|---|---|---|---|---|---|---|---|\n'
printf '%s\n' "${peer_rows[@]}"
printf '\ntargets (issue #52; for the full-size models on a 24 GB, 2-core machine%s):\n\n| target | measured | |\n|---|---|---|\n' \
  "$([[ $scale == small ]] && echo ': at SCALE=small only the form is shown')"
printf '%s\n' "${targets[@]}"
