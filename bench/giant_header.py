#!/usr/bin/env python3
"""A DINOv3 ViT-7B/16-shaped checkpoint (the torch hub's tensor names and shapes, bf16) whose data
section is a sparse hole: only the header and rope_embed.periods are written, so the 13.4 GB file
takes a few KB of disk. `vitreg info` reads nothing else; loading it would read zeros.

usage: giant_header.py OUT.safetensors [--dim 4096 --depth 40 --heads 32 --hidden 8192]"""
import argparse
import json
import os
import struct


def tensors(dim, depth, heads, hidden, registers=4, patch=16):
    yield "cls_token", [1, 1, dim]
    yield "storage_tokens", [1, registers, dim]
    yield "mask_token", [1, dim]
    yield "patch_embed.proj.weight", [dim, 3, patch, patch]
    yield "patch_embed.proj.bias", [dim]
    yield "rope_embed.periods", [dim // heads // 4]
    for i in range(depth):
        b = f"blocks.{i}."
        for norm in ("norm1", "norm2"):
            yield b + norm + ".weight", [dim]
            yield b + norm + ".bias", [dim]
        yield b + "attn.qkv.weight", [3 * dim, dim]
        yield b + "attn.qkv.bias", [3 * dim]
        yield b + "attn.qkv.bias_mask", [3 * dim]
        yield b + "attn.proj.weight", [dim, dim]
        yield b + "attn.proj.bias", [dim]
        yield b + "ls1.gamma", [dim]
        yield b + "ls2.gamma", [dim]
        for w in ("w1", "w2"):
            yield b + f"mlp.{w}.weight", [hidden, dim]
            yield b + f"mlp.{w}.bias", [hidden]
        yield b + "mlp.w3.weight", [dim, hidden]
        yield b + "mlp.w3.bias", [dim]
    yield "norm.weight", [dim]
    yield "norm.bias", [dim]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=8192)
    a = ap.parse_args()
    header, offset, periods_at = {}, 0, None
    for name, shape in tensors(a.dim, a.depth, a.heads, a.hidden):
        dtype, size = ("F32", 4) if name == "rope_embed.periods" else ("BF16", 2)
        n = size
        for s in shape:
            n *= s
        if name == "rope_embed.periods":
            periods_at = offset
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    bands = a.dim // a.heads // 4
    periods = [100.0 ** (j / bands) for j in range(bands)]  # DINOv3's rope theta 100
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.seek(8 + len(text) + periods_at)
        f.write(struct.pack(f"<{bands}f", *periods))
        f.truncate(8 + len(text) + offset)
    print(f"{a.out}: {offset / 1e9:.1f} GB of tensors, {os.stat(a.out).st_blocks * 512 // 1024} KB on disk")


if __name__ == "__main__":
    main()
