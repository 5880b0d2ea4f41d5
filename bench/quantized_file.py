#!/usr/bin/env python3
"""A quantized file against its source: file sizes, and the wall time and peak resident set of
`vitreg extract` of one 224 px image (load, pack, one forward) from the source at fp32, the
source @int8 (@int4; quantized while loading) and the int8 (int4) file @int8 (@int4; packed as
stored). The models:
the shipped untrained ViT (D 192) and a random-weight DINOv2 ViT-L/14 reg4 (F32, vitreg's layout;
speed and memory do not depend on the weights' values, so nothing is downloaded).

usage: /usr/bin/python3 bench/quantized_file.py [VITREG_BINARY] [WORK_DIR]
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BINARY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "apps", "vitreg")
WORK = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="vitreg-qfile-")
IMAGE = os.path.join(ROOT, "assets", "images", "chelsea.png")


def write_vit_l(path, dim=1024, depth=24, patch=14, grid=37, registers=4):
    """DINOv2 ViT-L/14 reg4's tensors, random, written one at a time (never all in memory)."""
    rng = np.random.default_rng(0)
    shapes = {"patch_embed.proj.weight": (dim, 3, patch, patch), "patch_embed.proj.bias": (dim,),
              "cls_token": (1, 1, dim), "register_tokens": (1, registers, dim), "pos_embed": (1, 1 + grid * grid, dim),
              "norm.weight": (dim,), "norm.bias": (dim,)}
    for i in range(depth):
        b = f"blocks.{i}."
        for n in ("norm1", "norm2"):
            shapes[b + n + ".weight"] = shapes[b + n + ".bias"] = (dim,)
        for n, rows, cols in (("attn.qkv", 3 * dim, dim), ("attn.proj", dim, dim), ("mlp.fc1", 4 * dim, dim),
                              ("mlp.fc2", dim, 4 * dim)):
            shapes[b + n + ".weight"], shapes[b + n + ".bias"] = (rows, cols), (rows,)
        shapes[b + "ls1.gamma"] = shapes[b + "ls2.gamma"] = (dim,)
    header, offset = {"__metadata__": {"heads": "16", "patch_size": str(patch), "num_registers": str(registers)}}, 0
    for name in sorted(shapes):
        n = int(np.prod(shapes[name])) * 4
        header[name] = {"dtype": "F32", "shape": list(shapes[name]), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name in sorted(shapes):
            f.write((rng.standard_normal(shapes[name], dtype=np.float32) * 0.02).tobytes())


def extract(model, out):
    """Wall seconds and peak RSS (MB) of one extract, through bench/peak_rss.py."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "peak_rss.py"), "100000", BINARY, "extract", model,
                        IMAGE, "-o", out, "-q", "--threads", "1"], capture_output=True, text=True)
    wall = time.monotonic() - t0
    peak = r.stdout.strip().splitlines()[-1]
    assert "status=ok" in peak, (model, r.stdout, r.stderr)
    return wall, float(peak.split()[0].split("=")[1])


def main():
    large = os.path.join(WORK, "vit_l14_reg4_f32.safetensors")
    if not os.path.exists(large):
        write_vit_l(large)
    for source in (os.path.join(ROOT, "weights", "vitreg-untrained-s14-d192-reg4.safetensors"), large):
        files = {}
        for q in ("int8", "int4"):
            files[q] = os.path.join(WORK, os.path.basename(source).replace(".safetensors", f"-{q}.safetensors"))
            subprocess.run([BINARY, "convert", source, files[q], "--dtype", q, "-q"], check=True)
        print(f"{os.path.basename(source)}: {os.path.getsize(source) / 1e6:.1f} MB f32, "
              + ", ".join(f"{os.path.getsize(f) / 1e6:.1f} MB {q} file" for q, f in files.items()))
        runs = [("source fp32", source)]
        for q, f in files.items():
            runs += [(f"source @{q}", f"{source}@{q}"), (f"{q} file @{q}", f"{f}@{q}")]
        for label, model in runs:
            wall, peak = extract(model, tempfile.mkdtemp(dir=WORK))
            print(f"  {label:16s} extract (load + one 224 px forward, 1 thread): {wall:6.2f} s, peak RSS {peak:6.0f} MB")


if __name__ == "__main__":
    main()
