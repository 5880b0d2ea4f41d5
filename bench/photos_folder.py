#!/usr/bin/env python3
"""Write a deterministic folder of camera-size JPEGs for the folder-throughput benchmark.

usage: bench/photos_folder.py OUTDIR [--n12 8] [--n2 16] [--n640 16] [--seed 0] [--jobs N]

Writes OUTDIR/12mp/ (4000x3000), OUTDIR/2mp/ (1600x1200) and OUTDIR/640x480/, baseline JPEGs,
quality 90, 4:2:0. Each picture is a 4:3 crop of one of the freely licensed sample photos in
assets/images (see assets/images/LICENSES.md), upscaled with LANCZOS, then given a little
deterministic sensor-like grain (luma noise, weaker and coarser chroma noise) so that the files
carry about the entropy of a camera's: a 12 MP file comes out at a few MB, not the ~1 MB a
smooth upscale would compress to. Same arguments, same bytes (Pillow 9.4, Debian python3-pil).
Needs only python3-pil and python3-numpy (Debian)."""
import argparse
import multiprocessing
import os
import sys

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["astronaut.jpg", "coffee.jpg", "chelsea.png", "camera.png", "retina.jpg"]
SIZES = {"12mp": (4000, 3000), "2mp": (1600, 1200), "640x480": (640, 480)}


def source_images(root):
    out = []
    for name in SOURCES:
        with Image.open(os.path.join(root, name)) as im:
            out.append(im.convert("RGB"))
    return out


def grain(rng, h, w, luma, chroma):
    """float32 [h, w, 3] noise: fine luma grain + chroma noise at half resolution (demosaicing
    and the camera's own chroma smoothing make a sensor's colour noise coarser than its luma)."""
    y = rng.standard_normal((h, w), dtype=np.float32) * luma
    hc, wc = (h + 1) // 2, (w + 1) // 2
    c = rng.standard_normal((hc, wc, 2), dtype=np.float32) * chroma
    c = np.repeat(np.repeat(c, 2, axis=0), 2, axis=1)[:h, :w]
    # YCbCr -> RGB offsets (BT.601)
    n = np.empty((h, w, 3), dtype=np.float32)
    n[..., 0] = y + 1.402 * c[..., 1]
    n[..., 1] = y - 0.344136 * c[..., 0] - 0.714136 * c[..., 1]
    n[..., 2] = y + 1.772 * c[..., 0]
    return n


def make_one(src, rng, size, luma, chroma):
    W, H = size
    sw, sh = src.size
    # a 4:3 crop of 70-100 % of the largest 4:3 window, at a random place, maybe mirrored
    cw0, ch0 = (sw, sw * 3 // 4) if sw * 3 <= sh * 4 else (sh * 4 // 3, sh)
    f = rng.uniform(0.7, 1.0)
    cw, ch = max(4, int(cw0 * f)), max(3, int(ch0 * f))
    x0 = int(rng.integers(0, sw - cw + 1))
    y0 = int(rng.integers(0, sh - ch + 1))
    im = src.crop((x0, y0, x0 + cw, y0 + ch))
    if rng.random() < 0.5:
        im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    im = im.resize((W, H), Image.Resampling.LANCZOS)
    a = np.asarray(im, dtype=np.float32)
    # a gentle exposure / white-balance change so copies of the same source differ
    a = a * rng.uniform(0.9, 1.1, size=3).astype(np.float32) + np.float32(rng.uniform(-8, 8))
    a += grain(rng, H, W, luma, chroma)
    return Image.fromarray(np.clip(a + 0.5, 0, 255).astype(np.uint8), "RGB")


_SRCS = {}


def write_one(job):
    a, k, name, i = job
    if a.images not in _SRCS:
        _SRCS[a.images] = source_images(a.images)
    srcs = _SRCS[a.images]
    rng = np.random.default_rng([a.seed, k, i])  # one stream per file: any subset is reproducible
    im = make_one(srcs[i % len(srcs)], rng, SIZES[name], a.luma, a.chroma)
    p = os.path.join(a.out, name, f"{name}-{i:03d}.jpg")
    im.save(p, "JPEG", quality=90, subsampling="4:2:0", optimize=False, progressive=False)
    return os.path.getsize(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--n12", type=int, default=8, help="4000x3000 files (default 8)")
    ap.add_argument("--n2", type=int, default=16, help="1600x1200 files (default 16)")
    ap.add_argument("--n640", type=int, default=16, help="640x480 files (default 16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--luma", type=float, default=5.0, help="luma grain, std in 8-bit levels")
    ap.add_argument("--chroma", type=float, default=2.5, help="chroma grain, std in 8-bit levels")
    ap.add_argument("--images", default=os.path.join(HERE, "..", "assets", "images"),
                    help="folder of the source photos")
    ap.add_argument("--jobs", type=int, default=0, help="processes (default: one a core)")
    a = ap.parse_args()
    jobs = []
    for k, (name, n) in enumerate([("12mp", a.n12), ("2mp", a.n2), ("640x480", a.n640)]):
        os.makedirs(os.path.join(a.out, name), exist_ok=True)
        jobs += [(a, k, name, i) for i in range(n)]
    # one process a core: each file has its own random stream, so the bytes do not depend on the order
    with multiprocessing.Pool(a.jobs or os.cpu_count()) as pool:
        sizes = pool.map(write_one, jobs, chunksize=1)
    for name in SIZES:
        got = [s for (_, _, nm, _), s in zip(jobs, sizes) if nm == name]
        if got:
            w, h = SIZES[name]
            print(f"{os.path.join(a.out, name)}: {len(got)} x {w}x{h}, {sum(got) / len(got) / 1e6:.2f} MB/file",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
