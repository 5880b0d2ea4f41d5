#!/usr/bin/env python3
"""A DINOv3 ViT-7B/16-shaped checkpoint (the torch hub's tensor names and shapes, bf16, as
bench/giant_model.py writes dinov3_vit7b16: no qkv bias, local_cls_norm) whose data section is a
sparse hole: only the header and rope_embed.periods are written, so the 13.4 GB file takes a few
KB of disk. `vitreg info` reads nothing else; loading it would read zeros.

usage: giant_header.py OUT.safetensors [--dim 4096 --depth 40 --heads 32 --hidden 8192]
Needs python3-numpy (giant_model.py's import)."""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import giant_model  # noqa: E402  (the one copy of the layout)


def main():
    full = giant_model.MODELS["dinov3_vit7b16"]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    for key in ("dim", "depth", "heads", "hidden"):
        ap.add_argument("--" + key, type=int, default=full[key])
    a = ap.parse_args()
    s = dict(full, dim=a.dim, depth=a.depth, heads=a.heads, hidden=a.hidden)
    text, size, offsets = giant_model.header(s)
    periods = giant_model.rope_periods(s["dim"] // s["heads"] // 4)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.seek(8 + len(text) + offsets["rope_embed.periods"])
        f.write(periods.tobytes())
        f.truncate(8 + len(text) + size)
    print(f"{a.out}: {size / 1e9:.1f} GB of tensors, {os.stat(a.out).st_blocks * 512 // 1024} KB on disk")


if __name__ == "__main__":
    main()
