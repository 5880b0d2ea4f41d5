#!/usr/bin/env python3
"""ms/image of the other families beside DINOv2, on this CPU: random F16 weights in vitreg's own
layout with the shapes of DINOv2 ViT-S/14 and ViT-B/14 with 4 registers (pos_embed 37x37,
resampled to 224 px), DINOv3 ViT-S/16 and ViT-B/16 (4 registers, axial RoPE, no pos_embed), a
ViT-S/16 with DINOv3's shapes but learned positions (what RoPE costs), SigLIP B/16 (no class token,
GELU tanh, the attention-pool head), OpenAI CLIP ViT-B/16 (QuickGELU, ln_pre, no patch bias,
projection 768->512), DeiT-III-S/16 (no_embed_class, LayerScale) and EVA-02 S/14 (learned positions
and EVA's RoPE, SwiGLU 384->2x1024, fc_norm over the mean), each timed by `vitreg bench` at 224x224,
one after the other in one run. Speed does not depend on the weights' values, so no download is
needed.

usage: /usr/bin/python3 bench/families.py [VITREG_BINARY] [THREADS] [KEEP_DIR]
(KEEP_DIR: write the models there and keep them, e.g. for farm-bench A/B runs)
"""
import json
import os
import re
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


def model(dim, depth, patch, grid, class_row, layer_scale, patch_bias, pre_norm, proj, registers=0, rope=False,
          class_token=True, attn_pool=False, swiglu=0):
    def randn(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)
    ones, zeros = np.ones(dim, np.float32), np.zeros(dim, np.float32)
    t = {"patch_embed.proj.weight": randn(dim, 3, patch, patch)}
    # EVA-02's avg pool: fc_norm over the mean, no final norm
    t.update({"fc_norm.weight": ones, "fc_norm.bias": zeros} if swiglu else {"norm.weight": ones, "norm.bias": zeros})
    if class_token:
        t["cls_token"] = randn(1, 1, dim)
    if not rope:
        t["pos_embed"] = randn(1, grid * grid + (1 if class_row else 0), dim)
    if registers:
        t["register_tokens"] = randn(1, registers, dim)
    if patch_bias:
        t["patch_embed.proj.bias"] = randn(dim)
    if pre_norm:
        t["norm_pre.weight"], t["norm_pre.bias"] = ones, zeros
    if proj:
        t["proj"] = randn(dim, proj)
    linears = (("attn.qkv", 3 * dim, dim), ("attn.proj", dim, dim), ("mlp.fc1", 4 * dim, dim), ("mlp.fc2", dim, 4 * dim))
    block_linears = linears[:2] + (("mlp.w12", 2 * swiglu, dim), ("mlp.w3", dim, swiglu)) if swiglu else linears
    for i in range(depth):
        b = f"blocks.{i}."
        for norm in ("norm1", "norm2"):
            t[b + norm + ".weight"], t[b + norm + ".bias"] = ones, zeros
        for name, rows, cols in block_linears:
            t[b + name + ".weight"], t[b + name + ".bias"] = randn(rows, cols), randn(rows)
        if layer_scale:
            t[b + "ls1.gamma"] = t[b + "ls2.gamma"] = np.full(dim, 0.1, np.float32)
    if attn_pool:  # SigLIP's MAP head
        t["attn_pool.latent"] = randn(1, 1, dim)
        t["attn_pool.norm.weight"], t["attn_pool.norm.bias"] = ones, zeros
        for name, rows, cols in linears:
            name = name.replace("attn.", "attn_pool.").replace("mlp.", "attn_pool.mlp.")
            t[name + ".weight"], t[name + ".bias"] = randn(rows, cols), randn(rows)
    return t


DINOV3 = {"family": "dinov3", "positions": "rope-axial", "rope_theta": "100", "layer_norm_eps": "1e-05"}
MODELS = {
    "DINOv2 ViT-S/14 reg4": (model(384, 12, 14, 37, True, True, True, False, 0, registers=4),
                             {"heads": "6", "patch_size": "14"}),
    "DINOv2 ViT-B/14 reg4": (model(768, 12, 14, 37, True, True, True, False, 0, registers=4),
                             {"heads": "12", "patch_size": "14"}),
    "DINOv3 ViT-S/16": (model(384, 12, 16, 14, True, True, True, False, 0, registers=4, rope=True),
                        {"heads": "6", "patch_size": "16", **DINOV3}),
    "ViT-S/16 reg4, learned": (model(384, 12, 16, 14, True, True, True, False, 0, registers=4),
                               {"heads": "6", "patch_size": "16", "layer_norm_eps": "1e-05"}),
    "DINOv3 ViT-B/16": (model(768, 12, 16, 14, True, True, True, False, 0, registers=4, rope=True),
                        {"heads": "12", "patch_size": "16", **DINOV3}),
    "SigLIP B/16": (model(768, 12, 16, 14, False, False, True, False, 0, class_token=False, attn_pool=True),
                    {"heads": "12", "patch_size": "16", "family": "siglip", "act": "gelu_tanh"}),
    "CLIP ViT-B/16": (model(768, 12, 16, 14, True, False, False, True, 512),
                      {"heads": "12", "patch_size": "16", "family": "clip", "act": "quick_gelu"}),
    "DeiT-III-S/16": (model(384, 12, 16, 14, False, True, True, False, 0), {"heads": "6", "patch_size": "16", "family": "timm"}),
    "EVA-02 S/14": (model(384, 12, 14, 16, True, False, True, False, 0, swiglu=1024),
                    {"heads": "6", "patch_size": "14", "family": "eva", "positions": "rope-eva", "rope_theta": "10000",
                     "rope_ref_grid": "16,16"}),
}

KEEP = sys.argv[3] if len(sys.argv) > 3 else None
with tempfile.TemporaryDirectory() as scratch:
    tmp = KEEP or scratch
    os.makedirs(tmp, exist_ok=True)
    for label, (tensors, metadata) in MODELS.items():
        path = os.path.join(tmp, re.sub(r"[^A-Za-z0-9.-]+", "_", label) + ".safetensors")
        write(path, tensors, metadata)
        for batch in ("1", "8"):
            r = subprocess.run([BINARY, "bench", path, "--size", "224x224", "--batch", batch, "--threads", THREADS],
                               capture_output=True, text=True, check=True)
            print(f"{label:24s} {r.stdout.strip().splitlines()[-1]}", flush=True)
