#!/usr/bin/env python3
"""The models of bench/giant.sh: random-weight checkpoints in their upstreams' torch hub layouts,
written as bf16 safetensors one tensor at a time (never the whole model in memory), and the
PyTorch and ONNX Runtime peers built from those files.

  giant_model.py write NAME OUT.safetensors [--scale full|small]
      writes NAME's tensors (upstream names and shapes; --scale small: width 128 and depth 2, the 7B's 256 and 8) and
      prints one line: the file, its size and what it holds
  giant_model.py torch NAME FILE --precision fp32|bf16 --px 224,518 --batch 1,4 [--iters N --warmup N]
      loads FILE into a compact PyTorch ViT (Debian's torch 1.13; every tensor read straight into
      its parameter, bf16 kept as bf16) and prints per case
      "torch PRECISION PX BATCH: S s/image" (s per image, median of --iters forwards)
  giant_model.py onnx NAME FILE OUT_DIR --px 224,518
      exports that fp32 model as ONNX, one graph per size (the position table resampled to it),
      OUT_DIR/NAME-PX.onnx; prints each path

NAME: dinov3_vit7b16 (DINOv3 ViT-7B/16: width 4096, 40 blocks, 32 heads, SwiGLU 8192 as w1/w2/w3,
4 storage tokens, axial RoPE, LayerScale, no qkv bias, local_cls_norm), dinov2_vitg14_reg4
(DINOv2 ViT-g/14 reg4: 1536, 40 blocks, 24 heads, fused SwiGLU w12/w3 of hidden 4096, pos_embed
37x37) or dinov2_vitl14_reg4 (DINOv2 ViT-L/14 reg4: 1024, 24 blocks, 16 heads, GELU MLP 4096).
The names and shapes are those tests/upstream/dinov2_fixtures.py and dinov3_fixtures.py record
from the upstreams' own builders. Scales keep activations finite through 40 blocks: matrices and
tokens normal x 0.02, norms 1 + normal x 0.02, LayerScale log-uniform in [1e-5, 0.1].
Needs python3-numpy; torch and onnx for the peers (Debian python3-torch, python3-onnx)."""
import argparse
import json
import math
import os
import struct
import sys
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

MODELS = {
    # layout, width, depth, heads, MLP hidden, patch, registers, pos_embed grid (0: RoPE)
    "dinov3_vit7b16": dict(layout="dinov3", dim=4096, depth=40, heads=32, hidden=8192, patch=16, registers=4, grid=0),
    "dinov2_vitg14_reg4": dict(layout="dinov2_swiglu", dim=1536, depth=40, heads=24, hidden=4096, patch=14,
                               registers=4, grid=37),
    "dinov2_vitl14_reg4": dict(layout="dinov2", dim=1024, depth=24, heads=16, hidden=4096, patch=14, registers=4,
                               grid=37),
}
# --scale small: the same names at width 128 (two heads of 64, as the hub files' unstated heads
# are read), depth 2; the hidden widths as the upstream builders round them at that width. The
# 7B's is larger (width 256 in 4 heads, 8 blocks): its fp32 weights then outweigh a 512 px
# forward's activations, so that giant.sh can set a --max-memory per precision that refuses fp32
# (and the fp32 comparison) and admits the others at 512 px, as 24 GB does at full size.
SMALL = {"dinov3_vit7b16": dict(dim=256, depth=8, heads=4, hidden=512),  # swiglu64: int(3 * 256 * 2 / 3)
         "dinov2_vitg14_reg4": dict(dim=128, depth=2, heads=2, hidden=344),  # swiglufused: (int(512 * 2 / 3) + 7) // 8 * 8
         "dinov2_vitl14_reg4": dict(dim=128, depth=2, heads=2, hidden=512)}
ROPE_THETA = 100.0  # DINOv3's pos_embed_rope_base


def spec(name, scale):
    s = dict(MODELS[name])
    if scale == "small":
        s.update(SMALL[name])
    return s


def tensors(s):
    """(name, shape) in the upstream state dict's order."""
    d, h, p = s["dim"], s["hidden"], s["patch"]
    yield "cls_token", [1, 1, d]
    if s["layout"] == "dinov3":
        yield "storage_tokens", [1, s["registers"], d]
    else:
        yield "pos_embed", [1, 1 + s["grid"] ** 2, d]
        yield "register_tokens", [1, s["registers"], d]
    yield "mask_token", [1, d]
    yield "patch_embed.proj.weight", [d, 3, p, p]
    yield "patch_embed.proj.bias", [d]
    if s["layout"] == "dinov3":
        yield "rope_embed.periods", [d // s["heads"] // 4]
    for i in range(s["depth"]):
        b = f"blocks.{i}."
        yield b + "norm1.weight", [d]
        yield b + "norm1.bias", [d]
        yield b + "attn.qkv.weight", [3 * d, d]
        if s["layout"] != "dinov3":  # the 7B has no qkv bias (qkv_bias=False)
            yield b + "attn.qkv.bias", [3 * d]
        yield b + "attn.proj.weight", [d, d]
        yield b + "attn.proj.bias", [d]
        yield b + "ls1.gamma", [d]
        yield b + "norm2.weight", [d]
        yield b + "norm2.bias", [d]
        if s["layout"] == "dinov3":
            for w in ("w1", "w2"):
                yield b + f"mlp.{w}.weight", [h, d]
                yield b + f"mlp.{w}.bias", [h]
            yield b + "mlp.w3.weight", [d, h]
            yield b + "mlp.w3.bias", [d]
        elif s["layout"] == "dinov2_swiglu":
            yield b + "mlp.w12.weight", [2 * h, d]
            yield b + "mlp.w12.bias", [2 * h]
            yield b + "mlp.w3.weight", [d, h]
            yield b + "mlp.w3.bias", [d]
        else:
            yield b + "mlp.fc1.weight", [h, d]
            yield b + "mlp.fc1.bias", [h]
            yield b + "mlp.fc2.weight", [d, h]
            yield b + "mlp.fc2.bias", [d]
        yield b + "ls2.gamma", [d]
    yield "norm.weight", [d]
    yield "norm.bias", [d]
    if s["layout"] == "dinov3":
        yield "local_cls_norm.weight", [d]
        yield "local_cls_norm.bias", [d]


def dtype_of(name):
    return "F32" if name == "rope_embed.periods" else "BF16"


def bf16_bits(x):
    """float32 -> the upper halves of its bits, rounded to nearest even (numpy has no bf16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def values(name, count, rng):
    """`count` random float32 values for tensor `name`, at its kind's scale."""
    if name.endswith(".gamma"):
        return (10.0 ** rng.uniform(-5, -1, count)).astype(np.float32)
    parts = name.split(".")
    if len(parts) > 1 and "norm" in parts[-2]:
        base = 1.0 if name.endswith(".weight") else 0.0
        return (base + 0.02 * rng.standard_normal(count, dtype=np.float32)).astype(np.float32)
    return rng.standard_normal(count, dtype=np.float32) * np.float32(0.02)


def header(s):
    """The safetensors header of spec `s` (padded to 8 bytes), the data section's size, and each
    tensor's offset in it; bench/giant_header.py writes the same header over a sparse file."""
    entries, offsets, offset = {}, {}, 0
    for t, shape in tensors(s):
        n = math.prod(shape) * (4 if dtype_of(t) == "F32" else 2)
        entries[t] = {"dtype": dtype_of(t), "shape": shape, "data_offsets": [offset, offset + n]}
        offsets[t] = offset
        offset += n
    text = json.dumps(entries).encode()
    return text + b" " * (-len(text) % 8), offset, offsets


def rope_periods(count):
    """periods[j] = theta^(j / bands), as DINOv3's init_weights."""
    return np.array([ROPE_THETA ** (j / count) for j in range(count)], np.float32)


def write(name, out, scale):
    s = spec(name, scale)
    text = header(s)[0]
    chunk = 1 << 23  # values made at a time: 32 MB of float32
    params = 0
    with open(out + ".part", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t, shape in tensors(s):
            count = math.prod(shape)
            if t == "rope_embed.periods":
                f.write(rope_periods(count).tobytes())
                continue
            params += count
            rng = np.random.default_rng(zlib.crc32(t.encode()))
            for start in range(0, count, chunk):
                f.write(bf16_bits(values(t, min(chunk, count - start), rng)).tobytes())
    os.replace(out + ".part", out)
    print(f"wrote {out}: {os.path.getsize(out) / 1e9:.2f} GB, {params / 1e9:.3f} B parameters in bf16, random, "
          f"{name} layout (width {s['dim']}, {s['depth']} blocks, {s['heads']} heads, MLP {s['hidden']})")


# ------------------------------------------------------------------------------------------------
# The PyTorch peer: the same forward as the upstreams' (pre-norm blocks, LayerScale, CLS +
# registers, DINOv2's resampled pos_embed or DINOv3's axial RoPE on the patches).
# ------------------------------------------------------------------------------------------------

def read_tensors(path, dtype):
    """name -> tensor of `dtype` (torch.float32 or torch.bfloat16), each read straight from the
    file into its own buffer (no mapping: mapped pages would count in the resident set too)."""
    import torch
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, h in header.items():
            if name == "__metadata__":
                continue
            f.seek(base + h["data_offsets"][0])
            raw = torch.empty(h["shape"], dtype=torch.float32 if h["dtype"] == "F32" else torch.int16)
            f.readinto(memoryview(raw.numpy()).cast("B"))
            t = raw if h["dtype"] == "F32" else raw.view(torch.bfloat16)
            out[name] = t if t.dtype == dtype or name == "rope_embed.periods" else t.to(dtype)
            del raw, t
    return out


def make_torch_model(name, path, dtype, scale):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
    import vit_reference as ref

    s = spec(name, scale)

    class ViT(torch.nn.Module):
        def __init__(self, weights):
            super().__init__()
            self.names = list(weights)
            for k, v in weights.items():
                self.register_parameter(k.replace(".", "__"), torch.nn.Parameter(v, requires_grad=False))
            self.positions = {}

        def w(self, k):
            return getattr(self, k.replace(".", "__"))

        def tables(self, gh, gw):
            """The grid's positions, made once per size (not timed: vitreg also keeps them)."""
            if (gh, gw) not in self.positions:
                if s["layout"] == "dinov3":
                    cos, sin = ref.rope_dinov3_tables(gh, gw, s["dim"] // s["heads"], ROPE_THETA)
                    self.positions[gh, gw] = (cos.to(dtype), sin.to(dtype))
                else:
                    pos = self.w("pos_embed")[0].float()
                    patch = ref.resample_pos_embed(pos[1:], s["grid"], gh, gw, "antialias")
                    self.positions[gh, gw] = (pos[:1].to(dtype), patch.to(dtype))
            return self.positions[gh, gw]

        def forward(self, x):
            B, _, H, W = x.shape
            p, d, heads = s["patch"], s["dim"], s["heads"]
            gh, gw = int(H) // p, int(W) // p  # ints: under ONNX tracing the sizes are tensors
            # the patch embedding as a product (bf16 conv2d has no CPU kernel in torch 1.13)
            cols = x.reshape(B, 3, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, 3 * p * p)
            t = F.linear(cols, self.w("patch_embed.proj.weight").reshape(d, -1), self.w("patch_embed.proj.bias"))
            cls = self.w("cls_token").expand(B, -1, -1)
            rope = None
            if s["layout"] == "dinov3":
                rope = self.tables(gh, gw)
                t = torch.cat([cls, self.w("storage_tokens").expand(B, -1, -1), t], 1)
            else:
                cls_pos, patch_pos = self.tables(gh, gw)
                t = torch.cat([cls + cls_pos, self.w("register_tokens").expand(B, -1, -1), t + patch_pos], 1)
            N, eps = t.shape[1], 1e-5 if s["layout"] == "dinov3" else 1e-6
            for i in range(s["depth"]):
                b = f"blocks.{i}."
                h = F.layer_norm(t, (d,), self.w(b + "norm1.weight"), self.w(b + "norm1.bias"), eps)
                bias = self.w(b + "attn.qkv.bias") if b + "attn.qkv.bias" in self.names else None
                q, k, v = F.linear(h, self.w(b + "attn.qkv.weight"), bias).reshape(B, N, 3, heads, -1).permute(2, 0, 3, 1, 4)
                if rope is not None:
                    q, k = ref.apply_rope(q, rope), ref.apply_rope(k, rope)
                a = ((q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
                a = F.linear(a.transpose(1, 2).reshape(B, N, d), self.w(b + "attn.proj.weight"), self.w(b + "attn.proj.bias"))
                t = t + self.w(b + "ls1.gamma") * a
                h = F.layer_norm(t, (d,), self.w(b + "norm2.weight"), self.w(b + "norm2.bias"), eps)
                t = t + self.w(b + "ls2.gamma") * self.mlp(b, h)
            t = F.layer_norm(t, (d,), self.w("norm.weight"), self.w("norm.bias"), eps)
            return t[:, 0], t[:, 1 + s["registers"]:]

        def mlp(self, b, h):
            def lin(n, x):
                return F.linear(x, self.w(b + n + ".weight"), self.w(b + n + ".bias"))
            if s["layout"] == "dinov3":
                return lin("mlp.w3", F.silu(lin("mlp.w1", h)) * lin("mlp.w2", h))
            if s["layout"] == "dinov2_swiglu":
                x1, x2 = lin("mlp.w12", h).chunk(2, dim=-1)
                return lin("mlp.w3", F.silu(x1) * x2)
            return lin("mlp.fc2", F.gelu(lin("mlp.fc1", h)))

    return ViT(read_tensors(path, dtype)).eval()


def torch_peer(a):
    import torch
    torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    t0 = time.perf_counter()
    m = make_torch_model(a.name, a.file, dtype, a.scale)
    print(f"torch {a.precision} load: {time.perf_counter() - t0:.2f} s (torch {torch.__version__})", flush=True)
    for px in a.px:
        for batch in a.batch:
            x = torch.randn(batch, 3, px, px, generator=torch.Generator().manual_seed(0)).to(dtype)
            with torch.inference_mode():
                for _ in range(a.warmup):
                    m(x)
                times = []
                for _ in range(a.iters):
                    t0 = time.perf_counter()
                    m(x)
                    times.append((time.perf_counter() - t0) / batch)
            print(f"torch {a.precision} {px} {batch}: {sorted(times)[len(times) // 2]:.4f} s/image", flush=True)


def onnx_export(a):
    import torch
    m = make_torch_model(a.name, a.file, torch.float32, a.scale)
    os.makedirs(a.out, exist_ok=True)
    for px in a.px:
        p = spec(a.name, a.scale)["patch"]
        m.tables(px // p, px // p)  # the resampled positions become the graph's constants
        out = os.path.join(a.out, f"{a.name}-{px}.onnx")
        torch.onnx.export(m, (torch.randn(1, 3, px, px),), out, input_names=["pixel_values"],
                          output_names=["cls", "patch"], opset_version=14, dynamic_axes={"pixel_values": {0: "batch"}})
        print(out, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    w = sub.add_parser("write")
    w.add_argument("name", choices=MODELS)
    w.add_argument("out")
    t = sub.add_parser("torch")
    t.add_argument("name", choices=MODELS)
    t.add_argument("file")
    t.add_argument("--precision", choices=("fp32", "bf16"), required=True)
    t.add_argument("--px", type=ints, default=[224])
    t.add_argument("--batch", type=ints, default=[1])
    t.add_argument("--iters", type=int, default=2)
    t.add_argument("--warmup", type=int, default=1)
    t.add_argument("--threads", type=int, default=2)
    o = sub.add_parser("onnx")
    o.add_argument("name", choices=MODELS)
    o.add_argument("file")
    o.add_argument("out")
    o.add_argument("--px", type=ints, default=[224])
    for p in (w, t, o):
        p.add_argument("--scale", choices=("full", "small"), default="full")
    a = ap.parse_args()
    if a.command == "write":
        write(a.name, a.out, a.scale)
    elif a.command == "torch":
        torch_peer(a)
    else:
        onnx_export(a)


if __name__ == "__main__":
    main()
