#!/usr/bin/env bash
# The README's "Dense features for segmentation" figure (assets/figures/dense-resolution.png):
# one shipped photo's DINOv3-style PCA picture (`vitreg dense --pca foreground`) at the model's
# native patch grid, through a sliding window at twice the resolution, and JBU-upsampled to
# pixels. Needs build/apps/vitreg (scripts/build.sh vitreg) and python3 with PIL (python3-pil;
# PYTHON names another interpreter).
# Usage: scripts/dense_figure.sh [MODEL] [IMAGE]
set -euo pipefail
cd "$(dirname "$0")/.."
vitreg=${VITREG:-build/apps/vitreg}
model=${1:-vitreg-untrained-s14-d192-reg4}
image=${2:-assets/images/chelsea.png}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# 451x300 → 448x294: a 32x21 grid; at twice the size, 64x42 from 448 px crops every 294 px.
"$vitreg" dense "$model" "$image" -o "$out/native" --resize 448x294 --pca foreground
"$vitreg" dense "$model" "$image" -o "$out/window" --resize 896x588 --window 448 --stride 294 --pca foreground
"$vitreg" dense "$model" "$image" -o "$out/jbu" --resize 448x294 --upsample jbu --pca foreground
"${PYTHON:-python3}" - "$out" assets/figures/dense-resolution.png <<'PY'
import sys
from PIL import Image, ImageDraw
out, target = sys.argv[1:]
size = (448, 294)
def halves(name):
    both = Image.open(f"{out}/{name}/0.pca.png").convert("RGB")
    w, h = both.size
    return both.crop((0, 0, w // 2, h)).resize(size, Image.BICUBIC), both.crop((w // 2, 0, w, h)).resize(size, Image.BICUBIC)
photo, native = halves("native")
_, window = halves("window")
_, jbu = halves("jbu")
panels = [("photo", photo), ("native grid 32x21", native), ("window 448/294 at 2x: 64x42", window),
          ("JBU to pixels", jbu)]
figure = Image.new("RGB", (len(panels) * (size[0] + 8) - 8, size[1] + 24), "white")
draw = ImageDraw.Draw(figure)
for k, (label, panel) in enumerate(panels):
    x = k * (size[0] + 8)
    figure.paste(panel, (x, 24))
    draw.text((x + 4, 6), label, fill="black")
figure.save(target, optimize=True)
print(target, figure.size)
PY
