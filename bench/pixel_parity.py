"""The pixel table of issue #28, re-measured: each file through the DINOv2 users' pipeline (PIL
Image.open(f).convert("RGB"), torchvision Resize(256, BICUBIC), CenterCrop(224), ToTensor,
Normalize(ImageNet)) and then the PyTorch reference ViT (tests/reference, float64), against
vitreg's Model.preprocess and forward on the same file.

usage: PYTHONPATH=build/python python3 bench/pixel_parity.py [FILE...]
       (default: every file of tests/fixtures/photos plus the photos in assets/images)
Prints a markdown table: the largest pixel difference (of 255, before normalization) and the
patch-token difference (max |Δ| / max |ref|), with --decode exact and, for JPEGs, --decode draft."""
import glob
import os
import sys

import numpy as np
import torch
import torchvision.transforms as T
from PIL import Image

import vitreg

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import vit_reference as ref  # noqa: E402

MODEL = os.path.join(ROOT, "weights", "vitreg-untrained-s14-d192-reg4.safetensors")  # random ViT, D 192, patch 14, 4 registers
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def main(files):
    cfg, w = ref.load_model(MODEL)
    model = vitreg.Model(MODEL)
    resize = T.Compose([T.Resize(256, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224)])
    tensor = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])
    print("| file | mode | pixels, exact (of 255) | patch tokens, exact | pixels, draft | patch tokens, draft |")
    print("|---|---|---|---|---|---|")
    for f in files:
        im = Image.open(f)
        mode = im.mode
        pil = resize(im.convert("RGB"))
        want_px = np.asarray(pil).astype(np.int32)
        x = tensor(pil)
        want = ref.forward(cfg, w, x[None].double())["patches"][0].numpy()
        row = [os.path.basename(f), mode]
        for decode in ("exact", "draft"):
            if decode == "draft" and im.format != "JPEG":
                row += ["–", "–"]
                continue
            got_x = model.preprocess(f, decode=decode)
            # Back to levels: the inverse of Normalize, rounded (exact inputs give integers).
            levels = np.rint((got_x * np.array(STD)[:, None, None] + np.array(MEAN)[:, None, None]) * 255).astype(np.int32)
            px = int(np.abs(levels.transpose(1, 2, 0) - want_px).max())
            got = model.forward(got_x[None])["patch"][0].reshape(-1, want.shape[-1])
            row += [str(px), f"{np.abs(got - want).max() / np.abs(want).max():.1e}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "photos", "files", "*"))) + \
        sorted(f for f in glob.glob(os.path.join(ROOT, "assets", "images", "*")) if not f.endswith(".md"))
    main(names)
