#!/usr/bin/env python3
"""Turn the held-out set into a foreground/background segmentation set for `vitreg linprobe`:
OUT/img_XXX.png (the held-out canvases) and OUT/mask_XXX.png where every 14×14 patch is 1 when
Fashion-MNIST items cover more than half of it (tests/fixtures/heldout/foreground.json, computed
from the items' alpha when the canvases were drawn), else 0.

    python3 weights/recipe/fg_masks.py /tmp/fg
    vitreg linprobe weights/vitreg-fmnist-softmax.safetensors --data /tmp/fg
"""
import json
import os
import shutil
import sys

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
HELDOUT = os.path.join(HERE, "..", "..", "tests", "fixtures", "heldout")
PATCH, GRID = 14, 8


def main(out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(HELDOUT, "foreground.json")) as f:
        cover = json.load(f)
    for i, name in enumerate(sorted(cover)):
        fg = (np.asarray(cover[name]).reshape(GRID, GRID) > 0.5).astype(np.uint8)
        mask = np.kron(fg, np.ones((PATCH, PATCH), dtype=np.uint8))
        shutil.copy(os.path.join(HELDOUT, name), os.path.join(out, f"img_{i:03d}.png"))
        Image.fromarray(mask).save(os.path.join(out, f"mask_{i:03d}.png"))
    print(f"wrote {len(cover)} image/mask pairs to {out}")


if __name__ == "__main__":
    main(sys.argv[1])
