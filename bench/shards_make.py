#!/usr/bin/env python3
"""Write the web-scale benchmark's set: N JPEGs of 500x375 as webdataset tar shards and, byte for
byte the same files, as a folder.

usage: bench/shards_make.py OUTDIR [--n 10000] [--shards 10] [--seed 0] [--jobs N]

Each picture is made from one of the freely licensed sample photos in assets/images (see
assets/images/LICENSES.md), the augmentations a training pipeline would apply, drawn per image from
a seeded generator:
- a random crop of 35% to 100% of the photo's area, of aspect ratio 3:4 to 16:9 (torchvision's
  RandomResizedCrop rule), resized to 500x375 with BICUBIC;
- a horizontal flip with probability 1/2;
- colour jitter: brightness, contrast and saturation each times a factor in [0.7, 1.3];
- a little sensor-like luma grain (sigma 3 levels), so that neighbouring crops do not compress alike;
- saved as a baseline JPEG, quality 90, 4:2:0, about 40 to 70 kB.

OUTDIR/shards/NNNNN.tar holds N/shards samples each, in key order: KEY.jpg, KEY.json
({"source", "crop", "flip", "jitter"}) and KEY.txt (a caption), KEY = the 6-digit image number, as
img2dataset writes them. OUTDIR/folder/KEY.jpg are the same JPEG bytes. Same arguments, same bytes
(Pillow 9.4, numpy 1.24: Debian's python3-pil and python3-numpy)."""
import argparse
import io
import json
import multiprocessing
import os
import tarfile

import numpy as np
from PIL import Image, ImageEnhance

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["astronaut.jpg", "coffee.jpg", "chelsea.png", "camera.png", "retina.jpg"]
SIZE = (500, 375)
_photos = []


def load_sources():
    root = os.path.join(HERE, "..", "assets", "images")
    for name in SOURCES:
        with Image.open(os.path.join(root, name)) as im:
            _photos.append(im.convert("RGB"))


def random_crop(rng, w, h):
    """torchvision's RandomResizedCrop(scale=(0.35, 1), ratio=(3/4, 16/9)) box; the centre 4:3
    box when ten tries do not fit."""
    for _ in range(10):
        area = w * h * rng.uniform(0.35, 1.0)
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(16 / 9)))
        cw, ch = int(round(np.sqrt(area * ratio))), int(round(np.sqrt(area / ratio)))
        if 0 < cw <= w and 0 < ch <= h:
            x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
            return x, y, cw, ch
    cw, ch = min(w, h * 4 // 3), min(h, w * 3 // 4)
    return (w - cw) // 2, (h - ch) // 2, cw, ch


def make_one(i, seed):
    rng = np.random.default_rng([seed, i])
    src = int(rng.integers(len(SOURCES)))
    photo = _photos[src]
    x, y, cw, ch = random_crop(rng, *photo.size)
    im = photo.crop((x, y, x + cw, y + ch)).resize(SIZE, Image.BICUBIC)
    flip = bool(rng.integers(2))
    if flip:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    jitter = [round(float(f), 3) for f in rng.uniform(0.7, 1.3, 3)]
    for enhance, f in zip((ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color), jitter):
        im = enhance(im).enhance(f)
    a = np.asarray(im, dtype=np.float32) + rng.standard_normal(im.size[::-1], dtype=np.float32)[..., None] * 3
    im = Image.fromarray(np.clip(a + 0.5, 0, 255).astype(np.uint8))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=90, subsampling=2)
    meta = {"source": SOURCES[src], "crop": [x, y, cw, ch], "flip": flip, "jitter": jitter}
    caption = f"a {'flipped ' if flip else ''}crop of {SOURCES[src].split('.')[0]}"
    return buf.getvalue(), meta, caption


def _make(args):
    return make_one(*args)


def add_member(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o644, "bench", "bench"
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    a = ap.parse_args()
    folder, shard_dir = os.path.join(a.out, "folder"), os.path.join(a.out, "shards")
    os.makedirs(folder, exist_ok=True)
    os.makedirs(shard_dir, exist_ok=True)
    per = -(-a.n // a.shards)
    with multiprocessing.Pool(a.jobs, initializer=load_sources) as pool:
        for s in range(a.shards):
            keys = range(s * per, min(a.n, (s + 1) * per))
            made = pool.map(_make, [(i, a.seed) for i in keys], chunksize=16)
            path = os.path.join(shard_dir, f"{s:05d}.tar")
            with tarfile.open(path + ".part", "w", format=tarfile.USTAR_FORMAT) as tar:
                for i, (jpeg, meta, caption) in zip(keys, made):
                    key = f"{i:06d}"
                    add_member(tar, key + ".jpg", jpeg)
                    add_member(tar, key + ".json", json.dumps(meta).encode())
                    add_member(tar, key + ".txt", caption.encode())
                    with open(os.path.join(folder, key + ".jpg"), "wb") as f:
                        f.write(jpeg)
            os.replace(path + ".part", path)
    print(f"{a.n} JPEGs of {SIZE[0]}x{SIZE[1]} in {a.shards} shards under {shard_dir}, the same files in {folder}")


if __name__ == "__main__":
    main()
