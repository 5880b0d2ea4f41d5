"""The Debian data `vitreg eval` is measured on, read in place (scripts/setup.sh --tests installs
opencv-doc and python3-skimage), and the small folders built from it in a scratch folder: the
correspondence pairs, a segmentation folder in the VOC layout from skimage's horse silhouette, and
skimage's lfw_subset as class folders. Used by tests/python/test_eval.py and bench/dense_eval.sh.
  eval_folders.py DIR   builds DIR/horse/{JPEGImages,SegmentationClass} and DIR/lfw/{face,nonface}
"""
import sys
from pathlib import Path

import numpy as np
from PIL import Image

OPENCV = "/usr/share/doc/opencv-doc/examples/data"
SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data"
PAIRS = [
    (f"{OPENCV}/graf1.png", f"{OPENCV}/graf3.png", f"{OPENCV}/H1to3p.xml"),
    (f"{OPENCV}/aloeL.jpg", f"{OPENCV}/aloeR.jpg", f"{OPENCV}/aloeGT.png"),
    (f"{SKIMAGE}/motorcycle_left.png", f"{SKIMAGE}/motorcycle_right.png", f"{SKIMAGE}/motorcycle_disp.npz"),
]


def horse_folder(root):
    """Six images built from skimage's horse silhouette: a texture inside the horse, another around it,
    shifted and flipped; masks as VOC palette PNGs (0 background, 1 horse, 255 on a 2-pixel border)."""
    horse = np.array(Image.open(f"{SKIMAGE}/horse.png"))[..., 0] < 128
    inside = np.array(Image.open(f"{SKIMAGE}/motorcycle_left.png").convert("RGB"))
    outside = np.array(Image.open(f"{OPENCV}/graf1.png").convert("RGB"))
    palette = [0, 0, 0, 128, 0, 0] + [0, 0, 0] * 253 + [224, 224, 192]
    images, masks = root / "JPEGImages", root / "SegmentationClass"
    images.mkdir(exist_ok=True)
    masks.mkdir(exist_ok=True)
    h, w = horse.shape
    for i in range(6):
        m = np.roll(horse, 17 * i, axis=1)
        if i % 2:
            m = m[:, ::-1]
        picture = np.where(m[..., None], inside[13 * i:13 * i + h, 9 * i:9 * i + w], outside[11 * i:11 * i + h, 7 * i:7 * i + w])
        Image.fromarray(picture.astype(np.uint8)).save(images / f"horse{i}.png")
        label = m.astype(np.uint8)
        grown = np.zeros_like(m)
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                grown |= np.roll(np.roll(m, dy, 0), dx, 1) != m
        label[grown] = 255
        mask = Image.fromarray(label, mode="P")
        mask.putpalette(palette)
        mask.save(masks / f"horse{i}.png")
    return images, masks


def lfw_folder(root):
    """skimage's lfw_subset: 100 faces, then 100 non-faces, 25x25 grey, as two class folders."""
    faces = np.load(f"{SKIMAGE}/lfw_subset.npy")
    for i, a in enumerate(faces):
        d = root / ("face" if i < 100 else "nonface")
        d.mkdir(exist_ok=True)
        Image.fromarray((a * 255).round().astype(np.uint8)).save(d / f"{i:03d}.png")
    return root


if __name__ == "__main__":
    out = Path(sys.argv[1])
    (out / "horse").mkdir(parents=True, exist_ok=True)
    (out / "lfw").mkdir(parents=True, exist_ok=True)
    horse_folder(out / "horse")
    lfw_folder(out / "lfw")
