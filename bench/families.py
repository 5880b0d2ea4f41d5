#!/usr/bin/env python3
"""ms/image of the other families beside DINOv2 at the same width, on this CPU: random F16
weights in vitreg's own layout with the shapes of DINOv2 ViT-B/14 (pos_embed 37x37, resampled to
224 px), OpenAI CLIP ViT-B/16 (QuickGELU, ln_pre, no patch bias, projection 768->512) and DeiT-III-S/16
(no_embed_class, LayerScale), each timed by `vitreg bench` at 224x224. Speed does not depend on the
weights' values, so no download is needed.

usage: /usr/bin/python3 bench/families.py [VITREG_BINARY] [THREADS]
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BINARY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "apps", "vitreg")
THREADS = sys.argv[2] if len(sys.argv) > 2 else "2"
rng = np.random.default_rng(0)


def write(path, tensors, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, value in tensors.items():
        data = value.astype(np.float16).tobytes()
        header[name] = {"dtype": "F16", "shape": list(value.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for data in blobs:
            f.write(data)


def model(dim, depth, patch, grid, class_row, layer_scale, patch_bias, pre_norm, proj):
    def randn(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)
    ones, zeros = np.ones(dim, np.float32), np.zeros(dim, np.float32)
    t = {"patch_embed.proj.weight": randn(dim, 3, patch, patch), "cls_token": randn(1, 1, dim),
         "pos_embed": randn(1, grid * grid + (1 if class_row else 0), dim), "norm.weight": ones, "norm.bias": zeros}
    if patch_bias:
        t["patch_embed.proj.bias"] = randn(dim)
    if pre_norm:
        t["norm_pre.weight"], t["norm_pre.bias"] = ones, zeros
    if proj:
        t["proj"] = randn(dim, proj)
    for i in range(depth):
        b = f"blocks.{i}."
        for norm in ("norm1", "norm2"):
            t[b + norm + ".weight"], t[b + norm + ".bias"] = ones, zeros
        for name, rows, cols in (("attn.qkv", 3 * dim, dim), ("attn.proj", dim, dim), ("mlp.fc1", 4 * dim, dim),
                                 ("mlp.fc2", dim, 4 * dim)):
            t[b + name + ".weight"], t[b + name + ".bias"] = randn(rows, cols), randn(rows)
        if layer_scale:
            t[b + "ls1.gamma"] = t[b + "ls2.gamma"] = np.full(dim, 0.1, np.float32)
    return t


MODELS = {
    "DINOv2 ViT-B/14": (model(768, 12, 14, 37, True, True, True, False, 0), {"heads": "12", "patch_size": "14"}),
    "CLIP ViT-B/16": (model(768, 12, 16, 14, True, False, False, True, 512),
                      {"heads": "12", "patch_size": "16", "family": "clip", "act": "quick_gelu"}),
    "DeiT-III-S/16": (model(384, 12, 16, 14, False, True, True, False, 0), {"heads": "6", "patch_size": "16", "family": "timm"}),
}

with tempfile.TemporaryDirectory() as tmp:
    for label, (tensors, metadata) in MODELS.items():
        path = os.path.join(tmp, label.replace(" ", "_").replace("/", "_") + ".safetensors")
        write(path, tensors, metadata)
        for batch in ("1", "8"):
            r = subprocess.run([BINARY, "bench", path, "--size", "224x224", "--batch", batch, "--threads", THREADS],
                               capture_output=True, text=True, check=True)
            print(f"{label:16s} {r.stdout.strip().splitlines()[-1]}")
