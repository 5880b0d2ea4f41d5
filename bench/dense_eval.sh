#!/usr/bin/env bash
# The dense-quality table of `vitreg eval` on Debian's data, read in place (opencv-doc and
# python3-skimage; scripts/setup.sh --tests installs them): correspondence on graf1/graf3
# (homography), aloeL/aloeR and the motorcycle pair (disparity); segmentation on a VOC-layout
# folder built from skimage's horse silhouette; leave-one-out k-NN on skimage's lfw_subset.
#   bench/dense_eval.sh [OUT_DIR] [MODEL_SPEC...]
# MODEL_SPEC as compare takes them (MODEL[@KIND][@evict=…] and any repair suffix), default the
# shipped models; REPAIRS=1 adds each shipped model's repairs beside it (@inpaint=artifacts,
# @denoise=shift:4 and shift:4:median, @debias and, with registers, @registers=mean, both from a
# calibrate-bias over 8 blank images, written to OUT_DIR/calibration). Writes OUT_DIR/{correspondence,segmentation,knn}/{eval.json,eval.csv,report.html}
# and prints the three tables. The shipped models are tiny (D 128, 6 blocks, trained on
# Fashion-MNIST canvases): their numbers say how a configuration compares with another, not what
# DINOv2 would score.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/vitreg-dense-eval}
shift || true
if (($#)); then
  specs=("$@")
fi
resize=${RESIZE:-long:448}
"$root/scripts/build.sh" vitreg >/dev/null
vitreg="$root/build/apps/vitreg"
if ((!$#)); then
  specs=()
  for f in "$root"/weights/vitreg-fmnist-*.safetensors; do
    specs+=("$f")
    [[ ${REPAIRS:-0} == 1 ]] || continue
    cal="$out/calibration/$(basename "$f" .safetensors).safetensors"
    mkdir -p "$out/calibration"
    "$vitreg" calibrate-bias "$f" --blank 8 -o "$cal" --quiet
    specs+=("$f@inpaint=artifacts" "$f@denoise=shift:4" "$f@denoise=shift:4:median" "$f@debias=$cal")
    [[ $(basename "$f") == *-reg[0-9]* ]] && specs+=("$f@registers=mean:$cal")
  done
fi
data="$out/data"
mkdir -p "$data"
/usr/bin/python3 "$root/tests/eval_folders.py" "$data"
pairs=()
while IFS=' ' read -r first second truth; do pairs+=(--pair "$first" "$second" "$truth"); done < <(
  /usr/bin/python3 -c "import sys; sys.path.insert(0, '$root/tests'); import eval_folders as e; print('\n'.join(' '.join(p) for p in e.PAIRS))")
echo "== correspondence (PCK, resize $resize)"
"$vitreg" eval correspondence "${specs[@]}" "${pairs[@]}" --resize "$resize" -o "$out/correspondence" | column -t -s,
echo "== segmentation (horse, dense k-NN and linear probe mIoU, resize $resize)"
"$vitreg" eval segmentation "${specs[@]}" --images "$data/horse/JPEGImages" --masks "$data/horse/SegmentationClass" \
  --resize "$resize" -o "$out/segmentation" | column -t -s,
echo "== knn (lfw_subset faces / non-faces, leave-one-out, CLS, 112x112)"
"$vitreg" eval knn "${specs[@]}" --images "$data/lfw" --resize 112x112 -o "$out/knn" | column -t -s,
echo "CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
