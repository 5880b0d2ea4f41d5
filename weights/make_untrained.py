#!/usr/bin/env python3
"""Write vitreg's embedded default checkpoint: an UNTRAINED, random-initialized ViT.

    python3 weights/make_untrained.py            # writes weights/vitreg-untrained-s14-d192-reg4.safetensors
    python3 weights/make_untrained.py -o X.safetensors --check

The file is a placeholder so that vitreg's README commands run before trained
checkpoints exist. Its features are meaningless.

Architecture (DINOv2 layout, see docs/design.md, "Reference semantics"):
  D=192, depth 6, 3 heads (head dim 64), patch 14, 4 register tokens,
  MLP fc1 -> exact GELU -> fc2 with hidden 768, LayerScale, final LayerNorm,
  pos_embed for a native 16x16 grid (224 px) plus CLS: [1, 257, 192].

Initialization (timm / DINOv2 style, chosen so activations stay well-scaled):
  * every Linear and the patch-embed Conv2d weight: normal(0, 0.02) truncated to
    +-2 std (resampled), bias 0;
  * LayerNorm weight 1, bias 0;
  * LayerScale gamma 0.1 (every channel);
  * cls_token, register_tokens, pos_embed: normal(0, 0.02) (not truncated);
  * mask_token: 0 (as in DINOv2).

Determinism: only numpy's legacy RandomState (MT19937) is used, whose stream
numpy guarantees never to change; values are drawn in float64 in the fixed
order of TENSORS below and rounded to float16. The safetensors file is written
by hand (compact JSON header, keys in a fixed order), so rerunning the script
reproduces the identical file byte for byte. Needs only python3 + numpy.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

SEED = 0
DIM = 192
DEPTH = 6
HEADS = 3
PATCH = 14
REGISTERS = 4
MLP_HIDDEN = 4 * DIM  # 768
GRID = 16  # native grid: 16 x 16 patches = 224 px
LINEAR_STD = 0.02
TOKEN_STD = 0.02
LAYERSCALE = 0.1

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "vitreg-untrained-s14-d192-reg4.safetensors")

METADATA = {
    "heads": str(HEADS),
    "patch_size": str(PATCH),
    "num_registers": str(REGISTERS),
    "attention": "softmax",
    "pos_interp": "antialias",
    "layer_norm_eps": "1e-6",
    "image_mean": "0.485,0.456,0.406",
    "image_std": "0.229,0.224,0.225",
    "trained": "false",
    "description": ("UNTRAINED random-initialized placeholder; features are meaningless. "
                    "Replaced by trained checkpoints later."),
    "seed": str(SEED),
    "generator": "weights/make_untrained.py",
}


def tensor_specs():
    """(name, shape, init) in the fixed order that both drawing and writing use."""
    D, H = DIM, MLP_HIDDEN
    specs = [
        ("cls_token", (1, 1, D), "token"),
        ("register_tokens", (1, REGISTERS, D), "token"),
        ("pos_embed", (1, 1 + GRID * GRID, D), "token"),
        ("mask_token", (1, D), "zeros"),
        ("patch_embed.proj.weight", (D, 3, PATCH, PATCH), "linear"),
        ("patch_embed.proj.bias", (D,), "zeros"),
    ]
    for i in range(DEPTH):
        b = f"blocks.{i}."
        specs += [
            (b + "norm1.weight", (D,), "ones"),
            (b + "norm1.bias", (D,), "zeros"),
            (b + "attn.qkv.weight", (3 * D, D), "linear"),
            (b + "attn.qkv.bias", (3 * D,), "zeros"),
            (b + "attn.proj.weight", (D, D), "linear"),
            (b + "attn.proj.bias", (D,), "zeros"),
            (b + "ls1.gamma", (D,), "layerscale"),
            (b + "norm2.weight", (D,), "ones"),
            (b + "norm2.bias", (D,), "zeros"),
            (b + "mlp.fc1.weight", (H, D), "linear"),
            (b + "mlp.fc1.bias", (H,), "zeros"),
            (b + "mlp.fc2.weight", (D, H), "linear"),
            (b + "mlp.fc2.bias", (D,), "zeros"),
            (b + "ls2.gamma", (D,), "layerscale"),
        ]
    specs += [
        ("norm.weight", (D,), "ones"),
        ("norm.bias", (D,), "zeros"),
    ]
    return specs


def trunc_normal(rs, shape, std):
    """normal(0, std) truncated to [-2 std, 2 std] by resampling (deterministic)."""
    x = rs.standard_normal(int(np.prod(shape)))
    bad = np.abs(x) > 2.0
    while bad.any():
        x[bad] = rs.standard_normal(int(bad.sum()))
        bad = np.abs(x) > 2.0
    return (x * std).reshape(shape)


def make_tensors(seed):
    rs = np.random.RandomState(seed)
    out = []
    for name, shape, init in tensor_specs():
        if init == "linear":
            v = trunc_normal(rs, shape, LINEAR_STD)
        elif init == "token":
            v = rs.standard_normal(shape) * TOKEN_STD
        elif init == "zeros":
            v = np.zeros(shape)
        elif init == "ones":
            v = np.ones(shape)
        elif init == "layerscale":
            v = np.full(shape, LAYERSCALE)
        else:
            raise ValueError(init)
        out.append((name, v.astype("<f2")))
    return out


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    offset = 0
    for name, arr in tensors:
        n = arr.nbytes
        header[name] = {"dtype": "F16", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    hjson = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)  # pad so the data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for _, arr in tensors:
            f.write(np.ascontiguousarray(arr).tobytes())
    os.replace(tmp, path)


def check_file(path, expected):
    """Re-read the file with a minimal independent parser and compare."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert (8 + n) % 8 == 0, "data section not 8-byte aligned"
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__")
    assert meta == METADATA, "metadata mismatch"
    assert all(isinstance(v, str) for v in meta.values())
    data = blob[8 + n:]
    end = 0
    for name, arr in expected:
        e = header.pop(name)
        assert e["dtype"] == "F16" and e["shape"] == list(arr.shape), name
        a, b = e["data_offsets"]
        assert a == end and b - a == arr.nbytes, name
        got = np.frombuffer(data[a:b], dtype="<f2").reshape(arr.shape)
        assert np.array_equal(got, arr), name
        end = b
    assert not header, f"unexpected tensors: {sorted(header)}"
    assert end == len(data), "trailing bytes after the last tensor"
    params = sum(a.size for _, a in expected)
    print(f"ok: {path}: {len(blob)} bytes, header {n} bytes, "
          f"{len(expected)} tensors, {params} parameters")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true",
                    help="re-read the written file and verify header and data")
    args = ap.parse_args(argv)
    tensors = make_tensors(SEED)
    write_safetensors(args.output, tensors, METADATA)
    print(f"wrote {args.output} ({os.path.getsize(args.output)} bytes)")
    if args.check:
        check_file(args.output, tensors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
