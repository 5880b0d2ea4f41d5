#!/usr/bin/env python3
"""Self-check of the PyTorch reference (a few seconds):

  a. the attention normalizers reproduce the numbers of docs/design.md, "Attention normalizers";
  b. the reference forward equals a second, separately written forward (unfold patch embed,
     explicit LayerNorm, per-head einsum loop, normalizer as a softmax over [z, s] with the
     sink column dropped, and position embeddings resampled from the formulas of docs/design.md, "Reference semantics" in
     numpy float64) for every attention kind, MLP kind and position-interpolation mode, trace
     included (abstention = the sink column's probability, statistics in numpy);
  c. the resampling formulas of docs/design.md, "Reference semantics", and the bilinear formula of the dense-feature
     upsampling, equal torch.nn.functional.interpolate;
  d. the same weights written as dinov2, timm_reg and hf load to the same config and outputs;
  e. trace invariants (row sums, abstention, key mass, the last block output is the prenorm
     stream and its final norm the outputs) and rollout against hand-computed numbers;
  f. the fixtures on disk (when present) are what the reference computes now, the planted
     model's artifacts are the tokens its metadata names, upsample.safetensors holds what the
     bilinear formula gives, and the dense set's masks label exactly its objects' pixels;
  g. interventions (docs/design.md, "Interventions and the study"): sink keys and the robust artifact rule by hand; an empty
     eviction mask and K = 0 are the plain forward exactly; evicted attention against the
     formula written out (columns 0, softmax rows sum to 1, softmax-1 / sink rows to
     1 - abstention, abstention rises); test-time registers' token layout and the
     register-neuron edit recomputed layer by layer; sink calibration's mass function is
     increasing and its bisection brackets the target; the intervention fixtures on disk are
     what the reference computes now;
  i. the other families (docs/design.md, "Families"): QuickGELU by hand, the second forward on every family
     fixture spec, one CLIP tower in the open_clip, hf_clip and timm layouts (configs and text
     towers included) loading to the same facts and outputs, no_embed_class as a zero class row;
     SigLIP (docs/design.md, "Families"): tanh GELU by its formula, the hf_siglip layout's names both ways, the
     HF SigLIP tower rebuilt from torch.nn modules (Conv2d, LayerNorm, Linear, an explicit
     softmax attention, MultiheadAttention for the MAP head) from the fixtures' HF tensors against the
     reference, SiglipVisionModel and SiglipModel folders loading to one config and the same
     outputs, the layout and config rules (probe, model_type, defaults, refusals); timm's SigLIP
     tower (timm_siglip): the timm layout's names both ways (AttentionPoolLatent's q / kv =
     HF's in_proj split at D), the config its folder gives, the reference against timm's
     VisionTransformer rebuilt from torch.nn modules, hf_siglip's outputs at the native grid
     (not at 3x5: antialias vs size), the timm config rules (act_layer, crop_mode) and refusals;
     DINOv3 (docs/design.md, "Families"): the hf_dinov3 layout's names both ways (no k bias), the config its
     files give, (a) with every rotation angle 0 the forward is the DINOv2 forward of the same
     weights, (b) the attention against HF's formulation (nn.Linear, explicit cos / sin,
     rotate_half, F.softmax) and the tower against a torch.nn rebuild (folders, fixture cases,
     trace), (c) the RoPE tables by hand on a non-square grid (each axis its own count),
     test-time registers unrotated, detection, defaults and refusals; the torch-hub layout
     (dinov3_hub) both ways (the k bias masked, w12 = [w1; w2], the periods by hand) and its two
     .pth fixtures: what make_torch_files writes now, exactly the HF folders' weights;
     EVA-02 (docs/design.md, "Families"; timm Eva): the interleaved rotation against complex numbers, the tables
     by hand and against timm's float32 construction, with every angle 0 the plain attention,
     the timm_eva layout both ways on the three fixtures (timm's names exactly), the config the
     folders give, the tower against timm's Eva rebuilt from torch.nn modules (folders at four
     grids, the fixture cases), detection and the timm config rules;
  h. the study (docs/study.md): the summary keys are the doc's list, softmax weights sum to 1
     and softmax-1 / sink ones to 1 - abstention, the mass curve at the main size is
     weights_sum, the parameter and split bookkeeping, a single image has no calibration, and
     study/expected.json is what the reference computes now (every margin asserted again).

    /usr/bin/python3 tests/reference/check_reference.py      # exit status 1 on any failure
"""
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")
sys.path.insert(0, HERE)
sys.path.insert(0, FIXTURES)
sys.path.insert(0, os.path.join(HERE, ".."))
import vit_reference as ref  # noqa: E402
import make_fixtures as fx  # noqa: E402  (random well-scaled weights, model constants)
import make_torch_files as tf  # noqa: E402  (the DINOv3 torch-hub .pth fixtures and their asserts)
import study_reference as study  # noqa: E402
from png_util import decode_png  # noqa: E402

failures = []


def check(name, error, tol):
    ok = error <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {error:.2e} (tol {tol:.0e})")
    if not ok:
        failures.append(name)


def max_diff(a, b):
    d = torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)
    return d.abs().max().item() if d.numel() else 0.0


# --- a. docs/design.md, "Attention normalizers"
# -----------------------------------------------------------------------------

def check_design_attention_values():
    z = torch.tensor([2.0, 5.0, 3.0], dtype=torch.float64)
    p1 = ref.normalized_attention(z, "softmax1")
    check("softmax1([2,5,3])", max_diff(p1, [0.041773, 0.839025, 0.113550]), 1e-6)
    check("softmax1 sum", abs(p1.sum().item() - 0.994347), 1e-6)
    ps = ref.normalized_attention(z, "sink", torch.tensor(1.5, dtype=torch.float64))
    check("sink s=1.5", max_diff(ps, [0.040966, 0.822829, 0.111358]), 1e-6)
    check("sink abstention", abs(1 - ps.sum().item() - 0.024847), 1e-6)
    big = ref.normalized_attention(z + 1000, "softmax1")  # stable form: no overflow, no NaN
    check("softmax1 at z+1000 is finite and sums to ~1", abs(big.sum().item() - 1), 1e-12)
    check("softmax sums to 1", abs(ref.normalized_attention(z, "softmax").sum().item() - 1), 1e-15)


# --- c. docs/design.md, "Reference semantics" resampling formulas, in numpy float64
# -----------------------------------------

def cubic(t, a):
    """Keys' cubic convolution kernel."""
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return a * (((t - 5) * t + 8) * t - 4)
    return 0.0


def design_axis_weights(m, out, mode):
    """[out, m] matrix of one axis' resampling weights, as docs/design.md, "Reference semantics" words them."""
    weights = np.zeros((out, m))
    if mode in ("offset", "size"):
        scale = m / (out + 0.1) if mode == "offset" else m / out
        for i in range(out):
            src = (i + 0.5) * scale - 0.5
            base = math.floor(src)
            for k in range(-1, 3):  # taps idx-1..idx+2, clamped; A = -0.75
                weights[i, min(max(base + k, 0), m - 1)] += cubic(base + k - src, -0.75)
    else:  # antialias: A = -0.5, support widened by the downscale factor, renormalized
        scale = m / out
        stretch = max(scale, 1.0)
        support = 2 * stretch
        for i in range(out):
            center = scale * (i + 0.5)
            lo = max(int(center - support + 0.5), 0)
            hi = min(int(center + support + 0.5), m)
            taps = np.array([cubic((j - center + 0.5) / stretch, -0.5) for j in range(lo, hi)])
            weights[i, lo:hi] = taps / taps.sum()
    return weights


def design_resample(patch_pos, grid, h0, w0, mode):
    if (h0, w0) == (grid, grid):
        return patch_pos
    g = patch_pos.numpy().reshape(grid, grid, -1)
    out = np.einsum("ya,xb,abd->yxd", design_axis_weights(grid, h0, mode),
                    design_axis_weights(grid, w0, mode), g)
    return torch.from_numpy(out.reshape(h0 * w0, -1))


def bilinear_axis_weights(n, m):
    """[m, n] matrix of one axis' bilinear weights (align_corners False, no antialias):
    src = max((i + 0.5) * n / m - 0.5, 0), taps floor(src) and min(floor(src) + 1, n - 1)."""
    weights = np.zeros((m, n))
    for i in range(m):
        src = max((i + 0.5) * n / m - 0.5, 0.0)
        i0 = math.floor(src)
        weights[i, i0] += 1 - (src - i0)
        weights[i, min(i0 + 1, n - 1)] += src - i0
    return weights


def bilinear_upsample(features, height, width):
    """Channels-last [h,w,C] -> [height,width,C] from `bilinear_axis_weights`, numpy float64."""
    f = np.asarray(features, dtype=np.float64)
    return np.einsum("ya,xb,abc->yxc", bilinear_axis_weights(f.shape[0], height),
                     bilinear_axis_weights(f.shape[1], width), f)


def check_design_resampling():
    src = torch.randn(7 * 7, 5, generator=torch.Generator().manual_seed(3)).double()
    for mode in ref.POS_INTERP_MODES:
        for h, w in ((3, 5), (10, 4), (14, 14), (5, 9), (2, 13), (37, 2)):
            # torch in float64 here, so that only a wrong formula can exceed the tolerance
            check(f"documented formula == torch interpolate: {mode} 7x7->{h}x{w}",
                  max_diff(design_resample(src, 7, h, w, mode),
                           ref.resample_pos_embed(src, 7, h, w, mode, torch.float64)), 1e-12)
    grid = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(4)).double()
    for h, w in ((12, 20), (7, 11), (3, 5), (2, 3), (1, 9), (30, 1)):
        check(f"bilinear formula == torch interpolate: 3x5 -> {h}x{w}",
              max_diff(bilinear_upsample(grid, h, w),
                       ref.upsample_bilinear(grid, h, w, torch.float64)), 1e-12)


# --- b. a second forward ------------------------------------------------------------------------

def alt_forward(cfg, w, images):
    """A second forward, written apart from the reference's; the other families' flags too
    (no class token, no_embed_class, norm_pre, missing biases, QuickGELU, tanh GELU, fc_norm,
    proj, the attention-pool head attn_pool.*, DINOv3's rotation: `alt_rotate`; EVA-02's
    rotation `alt_rotate_eva`, inner attention norm attn.norm and MLP sub-norm mlp.norm)."""
    x = images.double()
    B, _, H, W = x.shape
    p, D, R = cfg.patch, cfg.dim, cfg.registers
    h0, w0 = H // p, W // p
    C = 1 if "cls_token" in w else 0                                       # class tokens
    cols = F.unfold(x, kernel_size=p, stride=p).transpose(1, 2)            # [B, h0*w0, 3*p*p]
    patches = cols @ w["patch_embed.proj.weight"].reshape(D, -1).T
    if "patch_embed.proj.bias" in w:
        patches = patches + w["patch_embed.proj.bias"]
    tokens = torch.zeros(B, C + R + h0 * w0, D, dtype=torch.float64)
    if "pos_embed" in w:
        pos = w["pos_embed"][0]
        class_row = pos.shape[0] == 1 + cfg.grid * cfg.grid                 # else no_embed_class
        if C:
            tokens[:, 0] = w["cls_token"].reshape(D) + (pos[0] if class_row else 0)
        tokens[:, C + R:] = patches + design_resample(pos[1:] if class_row else pos, cfg.grid,
                                                      h0, w0, cfg.pos_interp)
    else:  # DINOv3: no absolute positions; the rotation below
        assert cfg.positions == "rope_dinov3", cfg.positions
        if C:
            tokens[:, 0] = w["cls_token"].reshape(D)
        tokens[:, C + R:] = patches
    if R:
        tokens[:, C:C + R] = w["register_tokens"][0]

    def ln(t, name):
        mu = t.mean(-1, keepdim=True)
        var = ((t - mu) ** 2).mean(-1, keepdim=True)
        return (t - mu) / torch.sqrt(var + cfg.eps) * w[name + ".weight"] + w[name + ".bias"]

    def lin(t, name):
        y = t @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    if "norm_pre.weight" in w:
        tokens = ln(tokens, "norm_pre")

    hd = D // cfg.heads
    x = tokens
    layers = {"attn": [], "abstention": [], "mlp_hidden": [], "blocks": [], "logits": []}
    for i in range(cfg.depth):
        b = f"blocks.{i}."
        qkv = lin(ln(x, b + "norm1"), b + "attn.qkv")
        heads, probs, nulls, zs = [], [], [], []
        for h in range(cfg.heads):
            q, k, v = (qkv[..., j * D + h * hd: j * D + (h + 1) * hd] for j in range(3))
            if cfg.positions == "rope_dinov3":
                q, k = (alt_rotate(t, h0, w0, cfg.rope_theta) for t in (q, k))
            elif cfg.positions == "rope_eva":
                q, k = (alt_rotate_eva(t, h0, w0, cfg.rope_theta, cfg.rope_ref_grid) for t in (q, k))
            z = torch.einsum("bnd,bmd->bnm", q, k) / math.sqrt(hd)
            if cfg.attention == "softmax":
                a, null = torch.softmax(z, dim=-1), torch.zeros(z.shape[:-1], dtype=torch.float64)
            else:
                sinks = w.get(b + "attn.sinks")
                s = sinks[h] if cfg.attention == "sink" and sinks is not None else 0.0
                sink_column = torch.full(z.shape[:-1] + (1,), float(s), dtype=torch.float64)
                full = torch.softmax(torch.cat([z, sink_column], dim=-1), dim=-1)
                a, null = full[..., :-1], full[..., -1]
            heads.append(torch.einsum("bnm,bmd->bnd", a, v))
            probs.append(a)
            nulls.append(null)
            zs.append(z)
        merged = torch.cat(heads, dim=-1)
        if b + "attn.norm.weight" in w:
            merged = ln(merged, b + "attn.norm")
        x = x + w.get(b + "ls1.gamma", 1.0) * lin(merged, b + "attn.proj")
        hn = ln(x, b + "norm2")
        if cfg.mlp == "swiglu":
            u = lin(hn, b + "mlp.w12")
            x1, x2 = u[..., :u.shape[-1] // 2], u[..., u.shape[-1] // 2:]
            g = x1 * torch.sigmoid(x1) * x2
            m = lin(ln(g, b + "mlp.norm") if b + "mlp.norm.weight" in w else g, b + "mlp.w3")
        elif cfg.mlp == "quick_gelu":
            u = lin(hn, b + "mlp.fc1")
            g = u / (1 + torch.exp(-1.702 * u))
            m = lin(g, b + "mlp.fc2")
        elif cfg.mlp == "gelu_tanh":
            u = lin(hn, b + "mlp.fc1")
            g = gelu_tanh_formula(u)
            m = lin(g, b + "mlp.fc2")
        else:
            u = lin(hn, b + "mlp.fc1")
            g = 0.5 * u * (1 + torch.erf(u / math.sqrt(2)))
            m = lin(g, b + "mlp.fc2")
        x = x + w.get(b + "ls2.gamma", 1.0) * m
        layers["attn"].append(torch.stack(probs, dim=1))
        layers["abstention"].append(torch.stack(nulls, dim=1))
        layers["logits"].append(torch.stack(zs, dim=1))
        layers["mlp_hidden"].append(g)
        layers["blocks"].append(x)
    def final(t):
        return ln(t, "norm") if "norm.weight" in w else t

    xn = final(x)
    trace = {k: torch.stack(v, dim=1) for k, v in layers.items()}  # [B, L, ...]
    trace["blocks_normed"] = final(trace["blocks"])
    outputs = trace["blocks"].numpy()                                 # [B, L, N, D]
    values = outputs.reshape(*outputs.shape[:2], -1)
    centered = values - values.mean(axis=-1, keepdims=True)
    trace.update(norms=np.sqrt((outputs ** 2).sum(axis=-1)), inf_norm=np.abs(values).max(axis=-1),
                 kurtosis=(centered ** 4).mean(axis=-1) / (centered ** 2).mean(axis=-1) ** 2,
                 key_mass=trace["attn"].sum(dim=-2) / trace["attn"].shape[-1])
    pooled = xn[:, C + R:].sum(dim=1) / (h0 * w0)
    if "fc_norm.weight" in w:
        pooled = ln(pooled, "fc_norm")
    if "attn_pool.latent" in w:  # one latent query per head over every token, then its MLP
        q = lin(w["attn_pool.latent"][0, :1], "attn_pool.q")               # [1, D]
        kv = lin(xn, "attn_pool.kv")
        heads = []
        for h in range(cfg.heads):
            qh, kh, vh = q[:, h * hd:(h + 1) * hd], kv[..., h * hd:(h + 1) * hd], kv[..., D + h * hd:D + (h + 1) * hd]
            a = torch.softmax(torch.einsum("qd,bmd->bqm", qh, kh) / math.sqrt(hd), dim=-1)
            heads.append(torch.einsum("bqm,bmd->bqd", a, vh))
        o = lin(torch.cat(heads, dim=-1), "attn_pool.proj")[:, 0]
        u = lin(ln(o, "attn_pool.norm"), "attn_pool.mlp.fc1")
        pooled = o + lin(gelu_tanh_formula(u) if cfg.mlp == "gelu_tanh" else
                         0.5 * u * (1 + torch.erf(u / math.sqrt(2))), "attn_pool.mlp.fc2")
    out = {"cls": xn[:, 0] if C else pooled, "registers": xn[:, C:C + R], "patches": xn[:, C + R:],
           "pooled": pooled, "prenorm": x, "trace": trace}
    if "proj" in w:
        out["embedding"] = torch.einsum("bd,de->be", out["cls"], w["proj"])
    return out


def alt_rotate(t, gh, gw, theta):
    """DINOv3's rotation of the last gh*gw tokens of one head's t [B,N,hd], pair by pair in numpy:
    dimension j < hd/2 pairs with j + hd/2 and turns by the angle 2 pi c theta^(-4f/hd), where
    (axis, f) = divmod(j, hd/4), c the patch centre on that axis (y for axis 0, x for axis 1),
    ((i + 0.5)/n)*2 - 1 with the axis' own count n: (u, v) -> (u cos - v sin, v cos + u sin)."""
    a = t.numpy()
    out = a.copy()
    B, N, hd = a.shape
    half, quarter, first = hd // 2, hd // 4, N - gh * gw
    for p in range(gh * gw):
        centre = ((p // gw + 0.5) / gh * 2 - 1, (p % gw + 0.5) / gw * 2 - 1)
        for j in range(half):
            axis, f = divmod(j, quarter)
            angle = 2 * math.pi * centre[axis] * theta ** (-4 * f / hd)
            u, v = a[:, first + p, j], a[:, first + p, j + half]
            out[:, first + p, j] = u * math.cos(angle) - v * math.sin(angle)
            out[:, first + p, j + half] = v * math.cos(angle) + u * math.sin(angle)
    return torch.from_numpy(out)


def alt_rotate_eva(t, gh, gw, theta, ref_grid):
    """EVA-02's rotation of the last gh*gw tokens of one head's t [B,N,hd], pair by pair in numpy
    float64: dimensions (2i, 2i+1) form pair i < hd/2 and turn by t_axis * theta^(-f / (hd/4)),
    where (axis, f) = divmod(i, hd/4), t_y = row / gh * ref_grid[0] and t_x = col / gw *
    ref_grid[1]: (u, v) -> (u cos - v sin, v cos + u sin)."""
    a = t.numpy()
    out = a.copy()
    B, N, hd = a.shape
    quarter, first = hd // 4, N - gh * gw
    for p in range(gh * gw):
        position = (p // gw / gh * ref_grid[0], p % gw / gw * ref_grid[1])
        for i in range(hd // 2):
            axis, f = divmod(i, quarter)
            angle = position[axis] * theta ** (-f / quarter)
            u, v = a[:, first + p, 2 * i], a[:, first + p, 2 * i + 1]
            out[:, first + p, 2 * i] = u * math.cos(angle) - v * math.sin(angle)
            out[:, first + p, 2 * i + 1] = v * math.cos(angle) + u * math.sin(angle)
    return torch.from_numpy(out)


def gelu_tanh_formula(u):
    """GELU's tanh approximation, 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))."""
    return 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))


def forward_difference(a, b):
    """Largest difference between two forward results, outputs and (when in `a`) trace."""
    diffs = [max_diff(a[k], b[k]) for k in a if k != "trace"]
    diffs += [max_diff(a["trace"][k], b["trace"][k]) for k in a.get("trace", {})]
    return max(diffs)


def spec_config(spec, **changes):
    cfg = ref.Config(dim=fx.DIM, depth=fx.DEPTH, heads=fx.HEADS, patch=fx.PATCH,
                     registers=spec.registers, grid=fx.GRID, mlp=spec.mlp)
    return replace(cfg, **changes)


def check_alternative_forward():
    gelu = fx.ModelSpec("check_gelu", "dinov2", registers=2, sinks=True)
    swiglu = fx.ModelSpec("check_swiglu", "dinov2", mlp="swiglu")
    images = {size: torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(sum(size)))
              for size in ((16, 16), (12, 28), (24, 20))}
    variants = [(gelu, dict(attention=a)) for a in ref.ATTENTION_KINDS]
    variants += [(swiglu, dict(pos_interp=m, eps=1e-5)) for m in ref.POS_INTERP_MODES]
    for spec, changes in variants:
        cfg, w = spec_config(spec, **changes), fx.random_weights(spec)
        for size, x in images.items():
            a, b = ref.forward(cfg, w, x, trace=True), alt_forward(cfg, w, x)
            check(f"reference == second forward, trace too: {spec.mlp} R={spec.registers} "
                  f"{cfg.attention} {cfg.pos_interp} {size[0]}x{size[1]}",
                  forward_difference(a, b), 2e-6)
    # no LayerScale tensors at all means LayerScale 1
    w = {k: v for k, v in fx.random_weights(gelu).items() if ".ls" not in k}
    cfg = spec_config(gelu)
    check("reference == second forward without LayerScale",
          forward_difference(ref.forward(cfg, w, images[(12, 28)]),
                             alt_forward(cfg, w, images[(12, 28)])), 2e-6)


# --- d. the three layouts ----------------------------------------------------------------------

DINOV2_LAYOUTS = {name: ref.LAYOUTS[name] for name in ("dinov2", "timm_reg", "hf")}

def check_layouts():
    for spec in (fx.ModelSpec("check_layouts", "dinov2", registers=2),
                 fx.ModelSpec("check_layouts_swiglu", "dinov2", registers=2, mlp="swiglu")):
        canonical = fx.random_weights(spec)
        for name, layout in DINOV2_LAYOUTS.items():
            back = layout.to_canonical(layout.to_stored(canonical))
            expected = dict(canonical)
            if name == "timm_reg":  # cls absorbs pos_embed[0]; no mask_token
                del expected["mask_token"]
                expected["cls_token"] = canonical["cls_token"] + canonical["pos_embed"][:, :1]
                expected["pos_embed"] = torch.cat([torch.zeros_like(canonical["pos_embed"][:, :1]),
                                                   canonical["pos_embed"][:, 1:]], dim=1)
            same_names = sorted(back) == sorted(expected)
            check(f"{name} {spec.mlp}: to_canonical(to_stored(w)) names", 0 if same_names else 1, 0)
            if same_names:
                check(f"{name} {spec.mlp}: to_canonical(to_stored(w)) values",
                      max(max_diff(back[k], expected[k]) for k in expected), 0)

        with tempfile.TemporaryDirectory() as tmp:
            paths = {}
            for name, layout in DINOV2_LAYOUTS.items():
                stored = layout.to_stored(canonical)
                if name == "hf":
                    path = os.path.join(tmp, "hf")
                    ref.write_safetensors(os.path.join(path, "model.safetensors"), stored)
                    fx.write_json(os.path.join(path, "config.json"), fx.hf_config_json(
                        replace(spec, hf_config={"model_type": "dinov2_with_registers"})))
                else:
                    path = os.path.join(tmp, name + ".safetensors")
                    ref.write_safetensors(path, stored, "F32", {"heads": str(fx.HEADS)})
                paths[name] = path
            loaded = {name: ref.load_model(path) for name, path in paths.items()}
            base_cfg, base_w = loaded["dinov2"]
            x = torch.randn(2, 3, 12, 28, generator=torch.Generator().manual_seed(5))
            base = ref.forward(base_cfg, base_w, x)
            for name in ("timm_reg", "hf"):
                cfg, w = loaded[name]
                check(f"{name} {spec.mlp}: same config as dinov2", 0 if cfg == base_cfg else 1, 0)
                out = ref.forward(cfg, w, x)
                # timm's cls + pos_embed[0] is rounded once more to F32: ~1e-7
                check(f"{name} {spec.mlp}: same outputs as dinov2",
                      max(max_diff(out[k], base[k]) for k in base), 1e-6)


# --- i. the other families (docs/design.md, "Families")
# ---------------------------------------------------------

def check_families():
    """QuickGELU's numbers; the reference against the second forward for every family fixture
    spec; one CLIP tower written as open_clip, hf_clip and timm (each with its configs, text
    towers and a classifier-free head) loads to the same facts and outputs; a no_embed_class
    checkpoint is the class-row one with a zero class row; text-tower tensors change nothing."""
    cfg = ref.Config(dim=4, depth=1, heads=1, patch=1, registers=0, grid=1, mlp="quick_gelu")
    w = {"blocks.0.mlp.fc1.weight": torch.eye(4, dtype=torch.float64),
         "blocks.0.mlp.fc2.weight": torch.eye(4, dtype=torch.float64)}
    z = torch.tensor([[-2.0, -0.5, 0.0, 1.0]], dtype=torch.float64)
    _, hidden = ref.mlp(z, w, "blocks.0.mlp", cfg)
    by_hand = torch.tensor([[-2 / (1 + math.exp(3.404)), -0.5 / (1 + math.exp(0.851)), 0.0,
                             1 / (1 + math.exp(-1.702))]], dtype=torch.float64)
    check("QuickGELU = x * sigmoid(1.702 x)", max_diff(hidden, by_hand), 1e-15)

    for spec in fx.FAMILY_MODELS:
        hints = {"heads": spec.heads, "act": spec.act, "pos_interp": "antialias"}
        if spec.positions == "rope_dinov3":
            hints.update(family="dinov3", positions="rope_dinov3", rope_theta=100.0, grid=spec.grid)
        if spec.positions == "rope_eva":
            ref_grid = tuple(spec.configs["config.json"]["model_args"].get("ref_feat_shape", (16, 16)))
            hints.update(family="eva", positions="rope_eva", rope_theta=1e4, rope_ref_grid=ref_grid)
        cfg, w = ref.config_from_weights(fx.family_weights(spec), ref.Dinov2Layout,
                                         hints), fx.family_weights(spec)
        for h, wd in spec.sizes:
            x = torch.randn(2, 3, h, wd, generator=torch.Generator().manual_seed(h + wd))
            # (EVA: the reference's angles are float32 products, the second forward's float64)
            check(f"reference == second forward, trace too: {spec.name} {h}x{wd}",
                  forward_difference(ref.forward(cfg, w, x, trace=True), alt_forward(cfg, w, x)),
                  1e-5 if spec.positions == "rope_eva" else 2e-6)

    clip = fx.FamilySpec("check_clip", "open_clip", dim=32, heads=2, patch=8, grid=3,
                         other_grid=(2, 4), act="quick_gelu", pre_norm=True, patch_bias=False,
                         proj_dim=16)
    canonical = fx.family_weights(clip)
    x = torch.randn(2, 3, 16, 32, generator=torch.Generator().manual_seed(3))
    with tempfile.TemporaryDirectory() as tmp:
        g = torch.Generator().manual_seed(1)
        text = fx.clip_text_tower(g, embed=16)
        paths = {}
        for name in ("open_clip", "hf_clip", "timm"):
            folder = os.path.join(tmp, name)
            stored = (ref.TimmLayout.to_stored(canonical) if name == "timm"
                      else ref.LAYOUTS[name].to_stored(canonical))
            configs = {"open_clip": fx.open_clip_config(32, 2, 8, 3, 16, quick_gelu=True),
                       "hf_clip": fx.hf_clip_configs(32, 2, 8, 3, 16, "quick_gelu"),
                       "timm": fx.timm_config("vit_tiny_patch8_clip_quickgelu_24", 16, 2, 24, 1.0)}[name]
            if name != "timm":
                stored.update(text if name == "open_clip" else
                              {"text_model.embeddings.token_embedding.weight": text["token_embedding.weight"]})
            ref.write_safetensors(os.path.join(folder, "model.safetensors"), stored)
            for file, content in configs.items():
                fx.write_json(os.path.join(folder, file), content)
            paths[name] = folder
        loaded = {name: ref.load_model(path, pos_interp_override="antialias") for name, path in paths.items()}
        base_cfg, base_w = loaded["open_clip"]
        base = ref.forward(base_cfg, base_w, x)
        for name in ("hf_clip", "timm"):
            cfg, w = loaded[name]
            facts = ("family", "class_token", "pos_embed_class", "pre_norm", "final_norm", "proj_dim",
                     "mlp", "eps", "heads", "grid")
            same = all(getattr(cfg, k) == getattr(base_cfg, k) for k in facts)
            check(f"{name} CLIP: the same facts as open_clip", 0 if same else 1, 0)
            out = ref.forward(cfg, w, x)
            check(f"{name} CLIP: the same outputs as open_clip", max(max_diff(out[k], base[k]) for k in base), 1e-12)
        # The text tower changes nothing: the same file without it.
        alone = {k: v for k, v in ref.read_safetensors(os.path.join(paths["open_clip"], "model.safetensors"))[0].items()
                 if k.startswith("visual.")}
        ref.write_safetensors(os.path.join(paths["open_clip"], "model.safetensors"), alone)
        cfg, w = ref.load_model(paths["open_clip"], pos_interp_override="antialias")
        check("open_clip without its text tower: the same outputs",
              max(max_diff(ref.forward(cfg, w, x)[k], base[k]) for k in base), 0)

    deit = next(s for s in fx.FAMILY_MODELS if s.name == "timm_deit3")
    w = fx.family_weights(deit)
    cfg = ref.config_from_weights(w, ref.Dinov2Layout, {"heads": deit.heads})
    with_row = dict(w, pos_embed=torch.cat([torch.zeros_like(w["pos_embed"][:, :1]), w["pos_embed"]], dim=1))
    row_cfg = ref.config_from_weights(with_row, ref.Dinov2Layout, {"heads": deit.heads, "pos_interp": cfg.pos_interp})
    check("no_embed_class is a zero class-token row", 0 if (not cfg.pos_embed_class and row_cfg.pos_embed_class) else 1, 0)
    x = torch.randn(1, 3, 32, 64, generator=torch.Generator().manual_seed(4))
    check("no_embed_class forward == zero class row forward",
          max(max_diff(ref.forward(cfg, w, x)[k], ref.forward(row_cfg, with_row, x)[k]) for k in ("cls", "patches")), 0)


SIGLIP = {spec.name: spec for spec in fx.FAMILY_MODELS if spec.layout == "hf_siglip"}


def siglip_folder(spec, tmp):
    """The fixture folder of a family spec with config files (hf_siglip, hf_dinov3):
    tests/fixtures' when generated, else written into tmp by make_fixtures."""
    on_disk = os.path.join(FIXTURES, spec.path)
    if os.path.exists(os.path.join(on_disk, "model.safetensors")):
        return on_disk
    saved, fx.OUT = fx.OUT, tmp
    try:
        fx.write_family_model(spec)
    finally:
        fx.OUT = saved
    return os.path.join(tmp, spec.path)


def stored_cases(keep):
    """The cases.json entries keep(entry) selects, each with its case's tensors (none without an
    index)."""
    return [(entry, ref.read_safetensors(os.path.join(FIXTURES, entry["case"]))[0])
            for entry in fixture_index("cases.json") or [] if keep(entry)]


def stored_modules(stored, D, eps, prefix=""):
    """torch.nn modules loaded from stored tensors named `prefix` + name: load(module, name),
    a LayerNorm of width D, a Linear of the stored weight's shape (float64)."""
    def load(module, name):
        module.load_state_dict({k: stored[f"{prefix}{name}.{k}"] for k in module.state_dict()})
        return module.eval()

    def norm(name):
        return load(torch.nn.LayerNorm(D, eps=eps, dtype=torch.float64), name)

    def dense(name):
        out_features, in_features = stored[f"{prefix}{name}.weight"].shape
        return load(torch.nn.Linear(in_features, out_features, dtype=torch.float64), name)

    return load, norm, dense


def siglip_by_modules(folder, images):
    """HF SigLIP's vision tower rebuilt from torch.nn modules and the folder's HF-named tensors
    (float64; config.json as transformers reads it, with SiglipVisionConfig's defaults): Conv2d
    patch embedding, position embeddings interpolated as HF's interpolate_pos_encoding does
    (bicubic, no antialias; in float32, vitreg's precision for them), per block LayerNorm,
    q/k/v Linear, softmax(q k^T / sqrt(head_dim)) v, out_proj, fc1, F.gelu(approximate='tanh'),
    fc2; post_layernorm;
    the head as nn.MultiheadAttention(batch_first) loaded with in_proj / out_proj, then layernorm
    and its MLP. -> patches (post_layernormed), pooled (the head's output), prenorm."""
    stored, _ = ref.read_safetensors(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    vision = config["vision_config"] if config["model_type"] == "siglip" else config
    assert vision.get("hidden_act", "gelu_pytorch_tanh") == "gelu_pytorch_tanh"
    D, heads, p = vision["hidden_size"], vision["num_attention_heads"], vision["patch_size"]
    eps, M, hd = vision.get("layer_norm_eps", 1e-6), vision["image_size"] // p, D // heads
    f64 = torch.float64

    load, norm, dense = stored_modules(stored, D, eps, "vision_model.")

    def mlp(t, prefix):
        return dense(prefix + ".fc2")(F.gelu(dense(prefix + ".fc1")(t), approximate="tanh"))

    with torch.no_grad():
        conv = load(torch.nn.Conv2d(3, D, p, stride=p, dtype=f64), "embeddings.patch_embedding")
        x = conv(images.double()).flatten(2).transpose(1, 2)
        B, N, _ = x.shape
        h0, w0 = images.shape[-2] // p, images.shape[-1] // p
        pos = stored["vision_model.embeddings.position_embedding.weight"]
        if not (N == M * M and images.shape[-2] == images.shape[-1]):  # HF's rule
            grid = pos.float().reshape(1, M, M, D).permute(0, 3, 1, 2)
            pos = F.interpolate(grid, size=(h0, w0), mode="bicubic", align_corners=False)
            pos = pos.permute(0, 2, 3, 1).reshape(N, D).double()
        x = x + pos
        for i in range(vision["num_hidden_layers"]):
            b = f"encoder.layers.{i}"
            y = norm(b + ".layer_norm1")(x)
            q, k, v = (dense(f"{b}.self_attn.{n}_proj")(y).reshape(B, N, heads, hd).transpose(1, 2)
                       for n in "qkv")
            # explicit softmax attention (this torch, 1.13, has no F.scaled_dot_product_attention)
            a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(hd), dim=-1) @ v
            x = x + dense(b + ".self_attn.out_proj")(a.transpose(1, 2).reshape(B, N, D))
            x = x + mlp(norm(b + ".layer_norm2")(x), b + ".mlp")
        prenorm = x
        x = norm("post_layernorm")(x)
        head = torch.nn.MultiheadAttention(D, heads, batch_first=True, dtype=f64)
        load(head, "head.attention")
        probe = stored["vision_model.head.probe"].expand(B, -1, -1)
        h = head(probe, x, x, need_weights=False)[0]
        h = h + mlp(norm("head.layernorm")(h), "head.mlp")
    return {"patches": x, "pooled": h[:, 0], "prenorm": prenorm}


def relative_difference(a, b):
    return max_diff(a, b) / max(torch.as_tensor(b).abs().max().item(), 1e-300)


def check_siglip():
    """SigLIP (docs/design.md, "Families"): tanh GELU by its formula; the hf_siglip layout's names (exactly
    HF's) and back; the reference against the torch.nn rebuild on both fixture folders at the
    native and a resampled grid, and on the case inputs on disk; the two folders load to one
    config with the same weights; the MAP softmax is not degenerate; layout detection by probe
    and model_type, refusals, and defaults."""
    cfg = ref.Config(dim=4, depth=1, heads=1, patch=1, registers=0, grid=1, mlp="gelu_tanh")
    w = {"blocks.0.mlp.fc1.weight": torch.eye(4, dtype=torch.float64),
         "blocks.0.mlp.fc2.weight": torch.eye(4, dtype=torch.float64)}
    z = torch.tensor([[-3.0, -0.5, 0.7, 2.5]], dtype=torch.float64)
    by_hand = [0.5 * t * (1 + math.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t ** 3)))
               for t in z[0].tolist()]
    check("tanh GELU = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
          max_diff(ref.mlp(z, w, "blocks.0.mlp", cfg)[1], [by_hand]), 1e-15)

    spec = SIGLIP["hf_siglip"]
    canonical = fx.family_weights(spec)
    stored = ref.HFSiglipLayout.to_stored(canonical)
    v = "vision_model."
    names = {v + "embeddings.patch_embedding.weight", v + "embeddings.patch_embedding.bias",
             v + "embeddings.position_embedding.weight", v + "post_layernorm.weight",
             v + "post_layernorm.bias", v + "head.probe", v + "head.attention.in_proj_weight",
             v + "head.attention.in_proj_bias"}
    names |= {f"{v}head.{m}.{k}" for m in ("attention.out_proj", "layernorm", "mlp.fc1", "mlp.fc2")
              for k in ("weight", "bias")}
    names |= {f"{v}encoder.layers.{i}.{m}.{k}" for i in range(spec.depth)
              for m in ("layer_norm1", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                        "self_attn.out_proj", "layer_norm2", "mlp.fc1", "mlp.fc2")
              for k in ("weight", "bias")}
    check("hf_siglip: to_stored gives exactly HF SiglipVisionModel's names",
          len(set(stored) ^ names), 0)
    D = spec.dim
    shapes = {"head.probe": (1, 1, D), "head.attention.in_proj_weight": (3 * D, D),
              "embeddings.position_embedding.weight": (spec.grid ** 2, D)}
    check("hf_siglip: probe [1,1,D], in_proj [3D,D], position_embedding [M*M,D]",
          sum(tuple(stored[v + k].shape) != s for k, s in shapes.items()), 0)
    in_proj = stored[v + "head.attention.in_proj_weight"]
    check("hf_siglip: in_proj rows = [attn_pool.q; attn_pool.kv (k, v)]",
          max_diff(in_proj, torch.cat([canonical["attn_pool.q.weight"], canonical["attn_pool.kv.weight"]])), 0)
    back = ref.HFSiglipLayout.to_canonical(dict(stored, **{
        "text_model.head.weight": torch.zeros(2, 2), "logit_scale": torch.zeros(1),
        "logit_bias": torch.zeros(1), "vision_model.embeddings.position_ids": torch.zeros(1, 16)}))
    same = sorted(back) == sorted(canonical)
    check("hf_siglip: to_canonical(to_stored(w)) names (text tower, logit_* ignored)", 0 if same else 1, 0)
    if same:
        check("hf_siglip: to_canonical(to_stored(w)) values",
              max(max_diff(back[k], canonical[k]) for k in canonical), 0)

    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: siglip_folder(s, tmp) for name, s in SIGLIP.items()}
        loaded = {name: ref.load_model(folder) for name, folder in folders.items()}
        cfg, w = loaded["hf_siglip"]
        expected = dict(family="siglip", class_token=False, pos_embed_class=False, pre_norm=False,
                        final_norm=True, fc_norm=False, proj_dim=0, mlp="gelu_tanh", eps=1e-6,
                        pos_interp="size", pool="map", eval_squash=True, mean=ref.SIGLIP_MEAN,
                        std=ref.SIGLIP_STD, input_size=32, crop_pct=1.0, heads=3, dim=48, grid=4,
                        patch=8, depth=2, registers=0, attention="softmax")
        wrong = [k for k, value in expected.items() if getattr(cfg, k) != value]
        check(f"hf_siglip: the config SigLIP's files give ({wrong})", len(wrong), 0)
        full_cfg, full_w = loaded["hf_siglip_full"]
        check("hf_siglip_full (SiglipModel, no hidden_act / eps, BF16): the same config",
              0 if full_cfg == cfg else 1, 0)
        check("hf_siglip_full: the same vision weights",
              max(max_diff(full_w[k], w[k]) for k in w) if sorted(full_w) == sorted(w) else 1, 0)
        worst, worst_stored, peak, cases = 0.0, 0.0, 0.0, 0
        for name, folder in folders.items():
            cfg, w = loaded[name]
            for size in ((32, 32), (24, 40), (16, 48)):
                x = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(sum(size)))
                a, b = ref.forward(cfg, w, x), siglip_by_modules(folder, x)
                worst = max(worst, relative_difference(a["cls"], b["pooled"]),
                            *(relative_difference(a[k], b[k]) for k in b))
        check("SigLIP reference == torch.nn modules (pooled, patches, prenorm; 3 grids, 2 folders; "
              "relative)", worst, 1e-12)
        for entry, case in stored_cases(lambda e: e["layout"] == "hf_siglip"):
            cases += 1
            b = siglip_by_modules(os.path.join(FIXTURES, entry["model"]), case["input"])
            worst_stored = max(worst_stored, relative_difference(case["cls"], b["pooled"]),
                               relative_difference(case["pooled"], b["pooled"]),
                               relative_difference(case["patches"], b["patches"]),
                               relative_difference(case["prenorm_last"], b["prenorm"]))
            cfg, w = ref.load_model(os.path.join(FIXTURES, entry["model"]))
            xn = ref.final_norm(ref.forward(cfg, w, case["input"])["prenorm"], w, cfg)
            q = ref.linear(w["attn_pool.latent"], w, "attn_pool.q").reshape(cfg.heads, 1, -1)
            k = ref.linear(xn, w, "attn_pool.kv")[..., :cfg.dim]
            k = k.reshape(*k.shape[:2], cfg.heads, -1).transpose(1, 2)
            attn = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(cfg.dim // cfg.heads), dim=-1)
            peak = max(peak, attn.max().item())
        if fixture_index("cases.json") is not None:
            want = sum(len(s.sizes) for s in SIGLIP.values())
            check(f"cases.json holds the {want} SigLIP cases make_fixtures writes", abs(cases - want), 0)
            check("SigLIP fixture cases == torch.nn modules (cls = pooled; relative)", worst_stored, 1e-6)
            check("SigLIP fixture cases: the MAP softmax is not one-hot (largest probability)", peak, 0.9)

        stored, _ = ref.read_safetensors(os.path.join(folders["hf_siglip"], "model.safetensors"))
        headless = {k: t for k, t in stored.items() if ".head." not in k}
        check("detect: SigLIP by its probe, by model_type without one, CLIP otherwise",
              0 if (ref.detect_layout(stored) is ref.HFSiglipLayout
                    and ref.detect_layout(headless, "siglip_vision_model") is ref.HFSiglipLayout
                    and ref.detect_layout(headless, "siglip") is ref.HFSiglipLayout
                    and ref.detect_layout(headless) is ref.HFClipLayout) else 1, 0)
        with_class = dict(stored, **{"vision_model.embeddings.class_embedding": torch.zeros(48)})
        try:
            ref.detect_layout(with_class, "siglip")
            refused = False
        except ValueError:
            refused = True
        check("detect: a SigLIP model_type with a class_embedding is refused", 0 if refused else 1, 0)
        headless_cfg = ref.config_from_weights(ref.HFSiglipLayout.to_canonical(headless),
                                               ref.HFSiglipLayout, {"heads": 3})
        check("a SigLIP tower without its head pools the mean of the patches",
              0 if (headless_cfg.pool, headless_cfg.family) == ("avg", "siglip") else 1, 0)
    hints = ref.hints_from_hf_siglip_config({"model_type": "siglip", "vision_config": {}})
    check("SiglipModel vision_config defaults (768, 12, 12, patch 16, 224, tanh GELU, 1e-6)",
          0 if (hints["dim"], hints["heads"], hints["depth"], hints["patch_size"], hints["grid"],
                hints["act"], hints["layer_norm_eps"]) == (768, 12, 12, 16, 14, "gelu_tanh", 1e-6) else 1, 0)
    refusals = 0
    for config, preprocessor in (({"model_type": "siglip_vision_model", "hidden_act": "silu"}, None),
                                 ({"model_type": "siglip_vision_model"}, {"size": {"height": 32, "width": 48}}),
                                 ({"model_type": "siglip_vision_model"}, {"do_center_crop": True})):
        try:
            ref.hints_from_hf_siglip_config(config, preprocessor)
        except ValueError:
            refusals += 1
    check("SigLIP configs refused: another activation, a non-square size, a center crop", 3 - refusals, 0)
    plain = ref.Config(dim=4, depth=1, heads=1, patch=1, registers=0, grid=1)
    check("config_record: pool and eval_squash absent at their defaults",
          len({"pool", "eval_squash"} & set(ref.config_record(plain))), 0)


TIMM_SIGLIP = next(spec for spec in fx.FAMILY_MODELS if spec.name == "timm_siglip")


def timm_siglip_by_modules(folder, images):
    """timm's VisionTransformer(class_token=False, global_pool='map') rebuilt from torch.nn
    modules and the folder's timm-named tensors (float64; config.json's model_args as timm
    reads them): Conv2d patch embedding; pos_embed [1,M*M,D] resampled as timm's
    resample_abs_pos_embed does (in float32, bicubic, antialias, skipped at the native grid; no
    prefix tokens); per block LayerNorm, fused qkv Linear reshaped (B, N, 3, heads, hd),
    softmax(q k^T / sqrt(hd)) v, proj, fc1, the act_layer (nn.GELU when absent; gelu_tanh:
    approximate='tanh'), fc2; the final norm; AttentionPoolLatent: q from the latent, kv
    reshaped (B, N, 2, heads, hd) (k then v), proj, then x + mlp(norm(x)), the first latent.
    -> patches (normed), pooled (the head's output), prenorm."""
    stored, _ = ref.read_safetensors(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    args = config["model_args"]
    assert args.get("class_token") is False and config["global_pool"] == "map"
    act = args.get("act_layer", "gelu")
    assert act in ("gelu", "gelu_tanh"), act
    heads = args["num_heads"]
    D, _, p, _ = stored["patch_embed.proj.weight"].shape
    M, hd, eps, f64 = math.isqrt(stored["pos_embed"].shape[1]), D // heads, 1e-6, torch.float64

    load, norm, dense = stored_modules(stored, D, eps)

    def mlp(t, prefix):
        return dense(prefix + ".fc2")(F.gelu(dense(prefix + ".fc1")(t),
                                             approximate="tanh" if act == "gelu_tanh" else "none"))

    def attend(q, k, v):  # [B,h,Q,hd] x [B,h,N,hd]
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(hd), dim=-1) @ v

    with torch.no_grad():
        conv = load(torch.nn.Conv2d(3, D, p, stride=p, dtype=f64), "patch_embed.proj")
        x = conv(images.double()).flatten(2).transpose(1, 2)
        B, N, _ = x.shape
        h0, w0 = images.shape[-2] // p, images.shape[-1] // p
        pos = stored["pos_embed"]
        if (h0, w0) != (M, M):
            grid = pos.float().reshape(1, M, M, D).permute(0, 3, 1, 2)
            pos = F.interpolate(grid, size=(h0, w0), mode="bicubic", align_corners=False, antialias=True)
            pos = pos.permute(0, 2, 3, 1).reshape(1, N, D).double()
        x = x + pos
        for i in range(block_count_of(stored)):
            b = f"blocks.{i}"
            qkv = dense(b + ".attn.qkv")(norm(b + ".norm1")(x)).reshape(B, N, 3, heads, hd).permute(2, 0, 3, 1, 4)
            a = attend(*qkv.unbind(0))
            x = x + dense(b + ".attn.proj")(a.transpose(1, 2).reshape(B, N, D))
            x = x + mlp(norm(b + ".norm2")(x), b + ".mlp")
        prenorm = x
        x = norm("norm")(x)
        latent = stored["attn_pool.latent"].expand(B, -1, -1)
        q = dense("attn_pool.q")(latent).reshape(B, -1, heads, hd).transpose(1, 2)
        k, v = dense("attn_pool.kv")(x).reshape(B, N, 2, heads, hd).permute(2, 0, 3, 1, 4).unbind(0)
        h = dense("attn_pool.proj")(attend(q, k, v).transpose(1, 2).reshape(B, -1, D))
        h = h + mlp(norm("attn_pool.norm")(h), "attn_pool.mlp")
    return {"patches": x, "pooled": h[:, 0], "prenorm": prenorm}


def block_count_of(stored):
    return ref.block_count([k for k in stored if k.startswith("blocks.")])


def check_timm_siglip():
    """timm's SigLIP tower (docs/design.md, "Families"; vit_*_siglip_*, layout timm, family siglip): the timm
    layout's names (exactly timm's state dict: no cls_token, no fc_norm, no head,
    AttentionPoolLatent's q [D,D] and kv [2D,D]) both ways and [q; kv] = HF's in_proj of the
    same weights; the config its folder gives; the reference against timm's VisionTransformer
    rebuilt from torch.nn modules (3 grids; the fixture cases on disk); at the native grid the
    same weights and function as hf_siglip (equal outputs, and equal to the HF torch.nn
    rebuild), at 3x5 not (antialias vs size); the timm config rules (siglip in the name,
    act_layer, crop_mode) and refusals."""
    spec = TIMM_SIGLIP
    canonical = fx.family_weights(spec)
    stored = ref.TimmLayout.to_stored(canonical)
    check(f"timm_siglip: to_stored gives exactly timm's VisionTransformer(class_token=False, "
          f"global_pool='map') names ({len(stored)} tensors)", len(set(stored) ^ fx.timm_siglip_names(spec)), 0)
    D = spec.dim
    shapes = {"pos_embed": (1, spec.grid ** 2, D), "attn_pool.latent": (1, 1, D),
              "attn_pool.q.weight": (D, D), "attn_pool.kv.weight": (2 * D, D), "attn_pool.kv.bias": (2 * D,)}
    check("timm_siglip: pos_embed [1,M*M,D] (no class row), latent [1,1,D], q [D,D], kv [2D,D]",
          sum(tuple(stored[k].shape) != v for k, v in shapes.items()), 0)
    back = ref.TimmLayout.to_canonical(stored)
    same = sorted(back) == sorted(canonical)
    check("timm_siglip: timm canonical -> stored -> canonical names", 0 if same else 1, 0)
    if same:
        check("timm_siglip: timm canonical -> stored -> canonical values",
              max(max_diff(back[k], canonical[k]) for k in canonical), 0)
    hf_stored = ref.HFSiglipLayout.to_stored(fx.family_weights(SIGLIP["hf_siglip"]))
    in_proj = "vision_model.head.attention.in_proj_"
    check("timm_siglip: [attn_pool.q; attn_pool.kv] (weight, bias) == hf_siglip's in_proj (the same "
          "weights); kv rows [0:D] = HF's k rows [D:2D]",
          max(max_diff(torch.cat([stored[f"attn_pool.q.{k}"], stored[f"attn_pool.kv.{k}"]]), hf_stored[in_proj + k])
              for k in ("weight", "bias"))
          + max_diff(stored["attn_pool.kv.weight"][:D], hf_stored[in_proj + "weight"][D:2 * D]), 0)

    with tempfile.TemporaryDirectory() as tmp:
        folder = siglip_folder(spec, tmp)
        hf_folder = siglip_folder(SIGLIP["hf_siglip"], tmp)
        on_disk, _ = ref.read_safetensors(os.path.join(folder, "model.safetensors"))
        check("timm_siglip folder: timm's names exactly", len(set(on_disk) ^ fx.timm_siglip_names(spec)), 0)
        again = ref.TimmLayout.to_stored(ref.TimmLayout.to_canonical(on_disk))
        same = sorted(again) == sorted(on_disk)
        check("timm_siglip folder: timm stored -> canonical -> stored names", 0 if same else 1, 0)
        if same:
            check("timm_siglip folder: timm stored -> canonical -> stored values",
                  max(max_diff(again[k], on_disk[k]) for k in on_disk), 0)
        check("detect: timm_siglip's tensors are timm VisionTransformer names (dinov2 / timm, not timm_eva or HF)",
              0 if ref.detect_layout(on_disk) is ref.Dinov2Layout else 1, 0)
        cfg, w = ref.load_model(folder)
        expected = dict(family="siglip", class_token=False, pos_embed_class=False, pre_norm=False,
                        final_norm=True, fc_norm=False, proj_dim=0, mlp="gelu_tanh", eps=1e-6,
                        pos_interp="antialias", pool="map", eval_squash=False, mean=ref.SIGLIP_MEAN,
                        std=ref.SIGLIP_STD, input_size=32, crop_pct=1.0, heads=3, dim=48, grid=4,
                        patch=8, depth=2, registers=0, attention="softmax")
        wrong = [k for k, value in expected.items() if getattr(cfg, k) != value]
        check(f"timm_siglip: the config timm's files give ({wrong})", len(wrong), 0)
        hf_cfg, hf_w = ref.load_model(hf_folder)
        check("timm_siglip: hf_siglip's config but for pos_interp (antialias / size) and eval_squash "
              "(center crop / squash)", 0 if replace(cfg, pos_interp="size", eval_squash=True) == hf_cfg else 1, 0)
        check("timm_siglip: hf_siglip's canonical weights exactly",
              max(max_diff(w[k], hf_w[k]) for k in w) if sorted(w) == sorted(hf_w) else 1, 0)

        worst = 0.0
        for size in ((32, 32), (24, 40), (16, 48), (40, 16)):
            x = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(sum(size) + 1))
            a, b = ref.forward(cfg, w, x), timm_siglip_by_modules(folder, x)
            worst = max(worst, relative_difference(a["cls"], b["pooled"]),
                        *(relative_difference(a[k], b[k]) for k in b))
        check("timm SigLIP reference == timm's VisionTransformer from torch.nn modules (pooled, patches, "
              "prenorm; 4 grids; relative)", worst, 1e-12)
        x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(11))
        a, b = ref.forward(cfg, w, x), ref.forward(hf_cfg, hf_w, x)
        modules = timm_siglip_by_modules(folder, x), siglip_by_modules(hf_folder, x)
        check("timm_siglip == hf_siglip at the native grid: the reference's outputs, and timm's "
              "torch.nn rebuild against HF's (relative)",
              max(max(max_diff(a[k], b[k]) for k in b),
                  max(relative_difference(modules[0][k], modules[1][k]) for k in modules[1])), 1e-12)
        x = torch.randn(2, 3, 24, 40, generator=torch.Generator().manual_seed(12))
        a, b = ref.forward(cfg, w, x), ref.forward(hf_cfg, hf_w, x)
        moved = min(relative_difference(a[k], b[k]) for k in ("cls", "patches", "prenorm"))
        check("timm_siglip vs hf_siglip at 3x5: antialias vs size moves every output by > 1e-3 "
              f"(relative; {moved:.2e})", 0 if moved > 1e-3 else 1, 0)

        cases, worst_stored = 0, 0.0
        for entry, case in stored_cases(lambda e: e["model"] == spec.path):
            cases += 1
            b = timm_siglip_by_modules(os.path.join(FIXTURES, entry["model"]), case["input"])
            worst_stored = max(worst_stored, relative_difference(case["cls"], b["pooled"]),
                               relative_difference(case["pooled"], b["pooled"]),
                               relative_difference(case["patches"], b["patches"]),
                               relative_difference(case["prenorm_last"], b["prenorm"]))
        if fixture_index("cases.json") is not None:
            check(f"cases.json holds the {len(spec.sizes)} timm_siglip cases make_fixtures writes",
                  abs(cases - len(spec.sizes)), 0)
            check("timm_siglip fixture cases == timm's torch.nn rebuild (cls = pooled; relative)", worst_stored, 1e-6)

        # without act_layer timm builds nn.GELU: the exact GELU
        plain = os.path.join(tmp, "timm_siglip_gelu")
        os.makedirs(plain)
        config = json.loads(json.dumps(spec.configs["config.json"]))
        del config["model_args"]["act_layer"]
        fx.write_json(os.path.join(plain, "config.json"), config)
        os.symlink(os.path.join(os.path.abspath(folder), "model.safetensors"), os.path.join(plain, "model.safetensors"))
        gelu_cfg, gelu_w = ref.load_model(plain)
        x = torch.randn(1, 3, 24, 40, generator=torch.Generator().manual_seed(13))
        check("timm_siglip without model_args.act_layer: nn.GELU (mlp gelu), against the torch.nn rebuild",
              0 if gelu_cfg == replace(cfg, mlp="gelu") and relative_difference(
                  ref.forward(gelu_cfg, gelu_w, x)["cls"], timm_siglip_by_modules(plain, x)["pooled"]) < 1e-12 else 1, 0)

    def hints(**config):
        return ref.hints_from_timm_config(config)
    so400m = hints(architecture="vit_so400m_patch14_siglip_384", model_args={"class_token": False})
    tanh = hints(architecture="vit_base_patch16_siglip_224", model_args={"act_layer": "gelu_tanh"})
    squash = hints(architecture="vit_base_patch16_siglip_224", pretrained_cfg={"crop_mode": "squash"})
    center = hints(architecture="vit_base_patch16_siglip_224", pretrained_cfg={})
    clip = hints(architecture="vit_base_patch16_clip_224", pretrained_cfg={"crop_mode": "center"})
    rules = (so400m["family"] == "siglip" and "act" not in so400m and "eval_squash" not in so400m
             and tanh["family"] == "siglip" and tanh["act"] == "gelu_tanh" and squash["eval_squash"] is True
             and center["eval_squash"] is False and clip["family"] == "clip" and clip["eval_squash"] is False)
    check("timm config: *siglip* -> siglip; act_layer gelu_tanh -> gelu_tanh, absent -> gelu; pretrained_cfg "
          "crop_mode squash -> eval_squash, else center crop", 0 if rules else 1, 0)
    refusals = 0
    try:
        hints(architecture="vit_base_patch16_siglip_224", model_args={"act_layer": "silu"})
    except ValueError:
        refusals += 1
    try:
        with_cls = dict(canonical, cls_token=torch.zeros(1, 1, D, dtype=torch.float64))
        ref.config_from_weights(with_cls, ref.Dinov2Layout, hints(architecture="vit_base_patch16_siglip_224"))
    except ValueError:
        refusals += 1
    for bad in ({"attn_pool.qkv.weight": torch.zeros(3 * D, D)},
                {"attn_pool.kv.weight": torch.zeros(3 * D, D)}):
        broken = dict(stored, **bad)
        if "attn_pool.qkv.weight" in bad:
            del broken["attn_pool.q.weight"]
        try:
            ref.TimmLayout.to_canonical(broken)
        except ValueError:
            refusals += 1
    check("timm SigLIP refused: an act_layer the reference does not compute, a class token beside a siglip "
          "architecture, a fused attn_pool.qkv or a kv not [2D,D]", 4 - refusals, 0)


DINOV3 = {spec.name: spec for spec in fx.FAMILY_MODELS if spec.layout == "hf_dinov3"}


def dinov3_rope_hf(gh, gw, head_dim, theta):
    """(cos, sin) [gh*gw, head_dim] as HF's DINOv3ViTRopePositionEmbedding builds them (float64):
    patch centres from arange(0.5, n) / n per axis, meshgrid 'ij', * 2 - 1; inv_freq = 1 /
    theta ** arange(0, 1, 4 / head_dim); angles 2 pi coords[:, :, None] * inv_freq, flattened
    (y angles, then x angles), tiled twice."""
    f64 = torch.float64
    coords = torch.stack(torch.meshgrid(torch.arange(0.5, gh, dtype=f64) / gh,
                                        torch.arange(0.5, gw, dtype=f64) / gw, indexing="ij"), dim=-1)
    coords = 2.0 * coords.flatten(0, 1) - 1.0                                    # [P, 2] (y, x)
    inv_freq = 1 / theta ** torch.arange(0, 1, 4 / head_dim, dtype=f64)
    angles = (2 * math.pi * coords[:, :, None] * inv_freq[None, None, :]).flatten(1, 2).tile(2)
    return torch.cos(angles), torch.sin(angles)


def dinov3_attention_hf(stored, layer, x, gh, gw, heads, theta):
    """HF DINOv3ViTAttention rebuilt from torch.nn.Linear modules loaded with the stored HF
    tensors of layer `layer` (k_proj without a bias when the file has none): q, k, v
    projections, heads, the rotation q' = q cos + rotate_half(q) sin of the last gh*gw tokens
    (rotate_half: cat(-second half, first half)), F.softmax(q k^T * head_dim^-0.5) v, o_proj."""
    B, N, D = x.shape
    hd = D // heads

    def dense(name):
        prefix = f"layer.{layer}.attention.{name}"
        m = torch.nn.Linear(D, D, bias=prefix + ".bias" in stored, dtype=torch.float64)
        with torch.no_grad():
            m.weight.copy_(stored[prefix + ".weight"])
            if m.bias is not None:
                m.bias.copy_(stored[prefix + ".bias"])
        return m

    q, k, v = (dense(n)(x).view(B, N, heads, hd).transpose(1, 2) for n in ("q_proj", "k_proj", "v_proj"))
    cos, sin = dinov3_rope_hf(gh, gw, hd, theta)

    def rotate_half(t):
        return torch.cat((-t[..., hd // 2:], t[..., :hd // 2]), dim=-1)

    prefix = N - gh * gw
    q = torch.cat((q[..., :prefix, :], q[..., prefix:, :] * cos + rotate_half(q[..., prefix:, :]) * sin), dim=-2)
    k = torch.cat((k[..., :prefix, :], k[..., prefix:, :] * cos + rotate_half(k[..., prefix:, :]) * sin), dim=-2)
    a = F.softmax(torch.matmul(q, k.transpose(2, 3)) * hd ** -0.5, dim=-1) @ v
    return dense("o_proj")(a.transpose(1, 2).reshape(B, N, D))


def dinov3_by_modules(folder, images):
    """HF DINOv3ViTModel rebuilt from torch.nn modules and the folder's HF-named tensors (float64;
    config.json as transformers reads it): Conv2d patch embedding, [CLS, registers, patches] with
    no position embedding, per layer LayerNorm, `dinov3_attention_hf`, layer_scale1, LayerNorm,
    the MLP (down(gelu(up)) or down(silu(gate) * up)), layer_scale2; the final LayerNorm.
    -> cls (pooler_output, the normed CLS), registers, patches (normed), prenorm."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    stored, _ = ref.read_safetensors(os.path.join(folder, "model.safetensors"))
    D, heads, p = config["hidden_size"], config["num_attention_heads"], config["patch_size"]
    R, eps, f64 = config["num_register_tokens"], config["layer_norm_eps"], torch.float64
    images = images.double()
    B, _, H, W = images.shape
    gh, gw = H // p, W // p

    def norm(prefix):
        m = torch.nn.LayerNorm(D, eps=eps, dtype=f64)
        with torch.no_grad():
            m.weight.copy_(stored[prefix + ".weight"])
            m.bias.copy_(stored[prefix + ".bias"])
        return m

    def dense(prefix):
        weight = stored[prefix + ".weight"]
        m = torch.nn.Linear(weight.shape[1], weight.shape[0], dtype=f64)
        with torch.no_grad():
            m.weight.copy_(weight)
            m.bias.copy_(stored[prefix + ".bias"])
        return m

    with torch.no_grad():
        conv = torch.nn.Conv2d(3, D, p, stride=p, dtype=f64)
        conv.weight.copy_(stored["embeddings.patch_embeddings.weight"])
        conv.bias.copy_(stored["embeddings.patch_embeddings.bias"])
        patches = conv(images).flatten(2).transpose(1, 2)
        x = torch.cat([stored["embeddings.cls_token"].expand(B, -1, -1),
                       stored["embeddings.register_tokens"].expand(B, -1, -1), patches], dim=1)
        for i in range(config["num_hidden_layers"]):
            b = f"layer.{i}"
            a = dinov3_attention_hf(stored, i, norm(b + ".norm1")(x), gh, gw, heads, config["rope_theta"])
            x = x + stored[b + ".layer_scale1.lambda1"] * a
            y = norm(b + ".norm2")(x)
            if config["use_gated_mlp"]:
                m = dense(b + ".mlp.down_proj")(F.silu(dense(b + ".mlp.gate_proj")(y)) * dense(b + ".mlp.up_proj")(y))
            else:
                m = dense(b + ".mlp.down_proj")(F.gelu(dense(b + ".mlp.up_proj")(y)))
            x = x + stored[b + ".layer_scale2.lambda1"] * m
        xn = norm("norm")(x)
    return {"cls": xn[:, 0], "registers": xn[:, 1:1 + R], "patches": xn[:, 1 + R:], "prenorm": x}


def check_dinov3():
    """DINOv3 (docs/design.md, "Families"): the hf_dinov3 layout's names (exactly HF's, no k bias) and back; the
    config its files give; (a) with every angle 0 a DINOv3 block is the DINOv2 block of the same
    weights; (b) the reference's attention against HF's formulation rebuilt from nn.Linear and
    explicit cos / sin / rotate_half, and the whole tower against a torch.nn rebuild (both
    folders, the fixture cases and the trace on disk); (c) the tables by hand on a non-square
    grid, each axis by its own count (a common count or swapped axes would move the non-square
    case by far); test-time registers are not rotated; layout detection, defaults, refusals."""
    spec = DINOV3["hf_dinov3"]
    for name, s in DINOV3.items():
        canonical = fx.family_weights(s)
        stored = ref.HFDinov3Layout.to_stored(canonical)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.safetensors")
            ref.write_safetensors(path, stored)
            try:
                fx.assert_dinov3_names(s, path)
                names_ok = 0
            except AssertionError as e:
                print(e)
                names_ok = 1
        check(f"{name}: to_stored gives exactly DINOv3ViTModel's names (no k_proj.bias, no positions)", names_ok, 0)
        back = ref.HFDinov3Layout.to_canonical(dict(stored, **{"rope_embeddings.inv_freq": torch.zeros(4)}))
        same = sorted(back) == sorted(canonical)
        check(f"{name}: to_canonical(to_stored(w)) names (rope_embeddings.inv_freq ignored)", 0 if same else 1, 0)
        if same:
            check(f"{name}: to_canonical(to_stored(w)) values (k bias rows 0)",
                  max(max_diff(back[k], canonical[k]) for k in canonical), 0)
    canonical = fx.family_weights(spec)
    with_k = ref.HFDinov3Layout.to_stored(canonical, key_bias=True)
    nonzero = dict(canonical, **{"blocks.0.attn.qkv.bias": canonical["blocks.0.attn.qkv.bias"] + 1})
    try:
        ref.HFDinov3Layout.to_stored(nonzero)
        refused = False
    except AssertionError:
        refused = True
    check("hf_dinov3: key_bias=True writes k_proj.bias; a nonzero k bias is not dropped silently",
          0 if "layer.0.attention.k_proj.bias" in with_k and refused else 1, 0)
    gated = ref.HFDinov3Layout.to_stored(fx.family_weights(DINOV3["hf_dinov3_gated"]))
    w12 = fx.family_weights(DINOV3["hf_dinov3_gated"])["blocks.0.mlp.w12.weight"]
    check("hf_dinov3 gated: mlp.w12 = [gate_proj; up_proj] (swiglu's x1 is the gate)",
          max_diff(torch.cat([gated["layer.0.mlp.gate_proj.weight"], gated["layer.0.mlp.up_proj.weight"]]), w12), 0)
    cfg = ref.Config(dim=4, depth=1, heads=1, patch=1, registers=0, grid=1, mlp="swiglu")
    eye = torch.eye(4, dtype=torch.float64)
    w = {"blocks.0.mlp.w12.weight": torch.cat([eye, 2 * eye]), "blocks.0.mlp.w3.weight": eye}  # gate z, up 2z
    z = torch.tensor([[-2.0, -0.5, 0.3, 1.5]], dtype=torch.float64)
    check("swiglu hidden = silu(first half: the gate) * second half (up)",
          max_diff(ref.mlp(z, w, "blocks.0.mlp", cfg)[1], F.silu(z) * 2 * z), 1e-15)

    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: siglip_folder(s, tmp) for name, s in DINOV3.items()}
        loaded = {name: ref.load_model(folder) for name, folder in folders.items()}
        for name, (cfg, w) in loaded.items():
            expected = dict(family="dinov3", positions="rope_dinov3", rope_theta=100.0, class_token=True,
                            pos_embed_class=False, pre_norm=False, final_norm=True, fc_norm=False, proj_dim=0,
                            mlp="swiglu" if name.endswith("gated") else "gelu", eps=1e-5, pos_interp="size",
                            pool="avg", eval_squash=True, mean=ref.IMAGENET_MEAN, std=ref.IMAGENET_STD,
                            input_size=224, crop_pct=1.0, heads=3, dim=48, grid=4, patch=8, depth=2,
                            registers=4, attention="softmax")
            wrong = [k for k, value in expected.items() if getattr(cfg, k) != value]
            check(f"{name}: the config DINOv3's files give ({wrong})", len(wrong), 0)

        # (a) every angle 0: the DINOv3 block is the DINOv2 block (zero pos_embed, learned positions)
        worst = 0.0
        for name, (cfg, w) in loaded.items():
            v2_cfg = replace(cfg, positions="learned", rope_theta=0.0, family="dinov2", pos_embed_class=True)
            v2_w = dict(w, pos_embed=torch.zeros(1, 1 + cfg.grid ** 2, cfg.dim, dtype=torch.float64))
            for size in ((32, 32), (24, 40)):
                x = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(sum(size)))
                with ref.rotation_disabled():
                    a = ref.forward(cfg, w, x, trace=True)
                worst = max(worst, forward_difference(a, ref.forward(v2_cfg, v2_w, x, trace=True)))
        check("(a) DINOv3 with every angle 0 == DINOv2 of the same weights, every block and the trace "
              "(2 folders, 2 grids)", worst, 1e-12)

        # (b) the attention against HF's formulation, then the whole tower
        cfg, w = loaded["hf_dinov3"]
        stored, _ = ref.read_safetensors(os.path.join(folders["hf_dinov3"], "model.safetensors"))
        worst = 0.0
        g = torch.Generator().manual_seed(7)
        for gh, gw in ((4, 4), (3, 5), (5, 3), (1, 7)):
            for prefix in (5, 6):  # CLS + 4 registers, + one test-time register
                x = torch.randn(2, prefix + gh * gw, cfg.dim, generator=g, dtype=torch.float64)
                for layer in range(cfg.depth):
                    mine = ref.attention(x, w, f"blocks.{layer}.attn", cfg, rope=ref.rope_for(cfg, gh, gw))[0]
                    worst = max(worst, max_diff(mine, dinov3_attention_hf(stored, layer, x, gh, gw, cfg.heads,
                                                                          cfg.rope_theta)))
        check("(b) DINOv3 attention == HF's formulation (nn.Linear, cos / sin, rotate_half, F.softmax; "
              "4 grids, 5 and 6 prefix tokens)", worst, 1e-10)
        worst = 0.0
        for name, folder in folders.items():
            cfg, w = loaded[name]
            for size in ((32, 32), (24, 40), (40, 24), (16, 48)):
                x = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(sum(size) + 1))
                a, b = ref.forward(cfg, w, x), dinov3_by_modules(folder, x)
                worst = max(worst, *(relative_difference(a[k], b[k]) for k in b))
        check("(b) DINOv3 reference == torch.nn modules (cls, registers, patches, prenorm; 4 grids, "
              "2 folders; relative)", worst, 1e-12)
        cases, worst_stored = 0, 0.0
        for entry, case in stored_cases(lambda e: e["layout"] == "hf_dinov3"):
            cases += 1
            b = dinov3_by_modules(os.path.join(FIXTURES, entry["model"]), case["input"])
            worst_stored = max(worst_stored, relative_difference(case["prenorm_last"], b["prenorm"]),
                               *(relative_difference(case[k], b[k]) for k in ("cls", "registers", "patches")))
        for entry in fixture_index("traces.json") or []:
            if entry["model"] in {s.path for s in DINOV3.values()}:
                cases += 1
                trace, _ = ref.read_safetensors(os.path.join(FIXTURES, entry["file"]))
                b = dinov3_by_modules(os.path.join(FIXTURES, entry["model"]), trace["input"])
                worst_stored = max(worst_stored, relative_difference(trace["patches"], b["patches"]),
                                   relative_difference(trace["cls"], b["cls"]),
                                   relative_difference(trace["blocks"][-1], b["prenorm"][0]))
        if fixture_index("cases.json") is not None:
            want = sum(len(s.sizes) for s in DINOV3.values()) + len(fx.FAMILY_TRACES)
            check(f"the {want} DINOv3 fixture cases and traces make_fixtures writes are on disk", abs(cases - want), 0)
            check("DINOv3 fixture cases and trace == torch.nn modules (relative)", worst_stored, 1e-6)

        # (c) the tables by hand: gh 3, gw 5, head_dim 16, theta 100
        cos, sin = ref.rope_dinov3_tables(3, 5, 16, 100.0)
        by_hand_cos, by_hand_sin = torch.zeros(15, 16, dtype=torch.float64), torch.zeros(15, 16, dtype=torch.float64)
        for r in range(3):
            for c in range(5):
                for j in range(16):
                    centre = ((r + 0.5) / 3) * 2 - 1 if j % 8 < 4 else ((c + 0.5) / 5) * 2 - 1
                    angle = 2 * math.pi * centre * 100.0 ** (-(j % 4) / 4)
                    by_hand_cos[r * 5 + c, j], by_hand_sin[r * 5 + c, j] = math.cos(angle), math.sin(angle)
        check("(c) rope tables at 3x5 by hand (y over 3 rows, x over 5 columns, tiled)",
              max(max_diff(cos, by_hand_cos), max_diff(sin, by_hand_sin)), 1e-14)
        hf_cos, hf_sin = dinov3_rope_hf(3, 5, 16, 100.0)
        check("(c) rope tables at 3x5 == HF's construction", max(max_diff(cos, hf_cos), max_diff(sin, hf_sin)), 1e-14)
        tables = ref.rope_dinov3_tables
        wrong_rules = ("one count (the larger) for both axes", "axes swapped (x angles first)")
        shifts = {}
        cfg, w = loaded["hf_dinov3"]
        x = torch.randn(2, 3, 24, 40, generator=torch.Generator().manual_seed(3))
        right = ref.forward(cfg, w, x)
        for rule in wrong_rules:
            def wrong(gh, gw, hd, theta, rule=rule):
                if rule.startswith("one count"):
                    n = max(gh, gw)
                    c, s_ = tables(n, n, hd, theta)
                    return (c.reshape(n, n, hd)[:gh, :gw].reshape(gh * gw, hd),
                            s_.reshape(n, n, hd)[:gh, :gw].reshape(gh * gw, hd))
                c, s_ = tables(gh, gw, hd, theta)
                q = hd // 4
                order = torch.cat([torch.arange(q, 2 * q), torch.arange(q), torch.arange(3 * q, 4 * q), torch.arange(2 * q, 3 * q)])
                return c[:, order], s_[:, order]
            ref.rope_dinov3_tables = wrong
            try:
                shifts[rule] = fx.dinov3_shift(right, ref.forward(cfg, w, x))
            finally:
                ref.rope_dinov3_tables = tables
        check("(c) at 24x40 (3x5) a common count or swapped axes moves the outputs by > 1e-2 "
              f"(smallest output; {', '.join(f'{k} {v:.2e}' for k, v in shifts.items())}); margin",
              0 if min(shifts.values()) > 1e-2 else 1, 0)

        # test-time registers are prefix tokens: not rotated (layer 0's logits recomputed)
        cfg, w = loaded["hf_dinov3"]
        K, R = 1, cfg.registers
        x = torch.randn(1, 3, 24, 40, generator=torch.Generator().manual_seed(8))
        out = ref.forward(cfg, w, x, trace=True, intervention=ref.Intervention(ttr=K, neurons=((0, 3),)))
        tokens = ref.embed(x.double(), w, cfg, K)
        y = ref.layer_norm(tokens, w, "blocks.0.norm1", cfg.eps)
        q, k, _ = ref.linear(y, w, "blocks.0.attn.qkv").split(cfg.dim, dim=-1)
        hd = cfg.dim // cfg.heads
        q, k = (t.reshape(1, -1, cfg.heads, hd).transpose(1, 2)[0] for t in (q, k))   # [h,N,hd]
        cos, sin = ref.rope_dinov3_tables(3, 5, hd, cfg.rope_theta)
        rot = lambda t: t * cos + torch.cat([-t[..., hd // 2:], t[..., :hd // 2]], dim=-1) * sin
        prefix = 1 + R + K
        q_all = torch.cat([q[:, :prefix], rot(q[:, prefix:])], dim=1)
        k_all = torch.cat([k[:, :prefix], rot(k[:, prefix:])], dim=1)
        logits = q_all @ k_all.transpose(-2, -1) * hd ** -0.5
        check("a test-time register is not rotated (layer 0 logits with K = 1, rotation from token "
              f"{prefix} on)", max_diff(out["trace"]["logits"][0, 0], logits), 1e-12)

        stored, _ = ref.read_safetensors(os.path.join(folders["hf_dinov3"], "model.safetensors"))
        hf_v2, _ = ref.read_safetensors(os.path.join(FIXTURES, "models/hf_reg2/model.safetensors")) \
            if os.path.exists(os.path.join(FIXTURES, "models/hf_reg2/model.safetensors")) else ({}, None)
        detected = (ref.detect_layout(stored) is ref.HFDinov3Layout
                    and ref.detect_layout(stored, "dinov3_vit") is ref.HFDinov3Layout)
        refused = 0
        for names in ([hf_v2] if hf_v2 else []) + [{"embeddings.cls_token": None}]:
            try:
                ref.detect_layout(names, "dinov3_vit")
            except ValueError:
                refused += 1
        check("detect: DINOv3 by its conv patch embedding (or model_type); dinov3_vit over DINOv2 "
              "tensors refused", 0 if detected and refused == (2 if hf_v2 else 1) else 1, 0)
    hints = ref.hints_from_hf_dinov3_config({"model_type": "dinov3_vit"})
    check("DINOv3ViTConfig defaults (384, 6 heads, 12 layers, 1536, patch 16, 224, gelu, 1e-5, "
          "theta 100, 0 registers)",
          0 if (hints["dim"], hints["heads"], hints["depth"], hints["mlp_hidden"], hints["patch_size"],
                hints["grid"], hints["act"], hints["layer_norm_eps"], hints["rope_theta"],
                hints["num_registers"]) == (384, 6, 12, 1536, 16, 14, "gelu", 1e-5, 100.0, 0) else 1, 0)
    refusals = 0
    for config, preprocessor in (({"use_gated_mlp": True, "hidden_act": "gelu"}, None),
                                 ({"hidden_act": "silu"}, None),
                                 ({}, {"size": {"height": 224, "width": 256}}),
                                 ({}, {"do_center_crop": True})):
        try:
            ref.hints_from_hf_dinov3_config(dict(config, model_type="dinov3_vit"), preprocessor)
        except ValueError:
            refusals += 1
    check("DINOv3 configs refused: gated without silu, silu without the gate, a non-square size, "
          "a center crop", 4 - refusals, 0)
    plain = ref.Config(dim=4, depth=1, heads=1, patch=1, registers=0, grid=1)
    check("config_record: positions and rope_theta absent at their defaults",
          len({"positions", "rope_theta"} & set(ref.config_record(plain))), 0)


def check_dinov3_hub():
    """The facebookresearch/dinov3 torch-hub layout (Dinov3HubLayout): names both ways on both
    DINOv3 fixture specs, the masked k third (nonzero stored, zero read, a nonzero canonical k
    bias refused), w12 = [w1; w2], the periods by hand; the two .pth fixtures on disk are what
    make_torch_files writes now and hold exactly the HF folders' weights (its asserts rerun)."""
    hub = ref.Dinov3HubLayout
    for name, s in DINOV3.items():
        canonical = fx.family_weights(s)
        D = s.dim
        masked = {k: torch.full((D,), 0.75, dtype=torch.float64) for k in canonical if k.endswith(".attn.qkv.bias")}
        stored = hub.to_stored(canonical, s.heads, 100.0, masked_k_bias=masked)
        mlp = ("w1", "w2", "w3") if s.act == "swiglu" else ("fc1", "fc2")
        names = ["cls_token", "storage_tokens", "mask_token", "patch_embed.proj.weight", "patch_embed.proj.bias",
                 "rope_embed.periods"]
        for i in range(s.depth):
            names += [f"blocks.{i}.{k}" for k in ("norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias",
                                                   "attn.qkv.bias_mask", "attn.proj.weight", "attn.proj.bias",
                                                   "ls1.gamma", "norm2.weight", "norm2.bias",
                                                   *(f"mlp.{m}.{t}" for m in mlp for t in ("weight", "bias")),
                                                   "ls2.gamma")]
        names += ["norm.weight", "norm.bias"]
        check(f"{name}: dinov3_hub to_stored gives DinoVisionTransformer.state_dict()'s names in its order",
              0 if list(stored) == names else 1, 0)
        k_rows = [stored[k][D:2 * D] for k in masked]
        mask_ok = all(torch.equal(stored[k + "_mask"], torch.cat([torch.ones(D), torch.zeros(D), torch.ones(D)]).double())
                      for k in masked)
        check(f"{name}: dinov3_hub bias_mask ones with the k third 0; the stored k third holds masked_k_bias",
              0 if mask_ok and all(bool((r == 0.75).all()) for r in k_rows) else 1, 0)
        back = hub.to_canonical(stored)
        same = sorted(back) == sorted(canonical)
        check(f"{name}: dinov3_hub to_canonical(to_stored(w)) names", 0 if same else 1, 0)
        if same:
            check(f"{name}: dinov3_hub to_canonical(to_stored(w)) values (the nonzero k third masked to 0)",
                  max(max_diff(back[k], canonical[k]) for k in canonical), 0)
        if s.act == "swiglu":
            check(f"{name}: dinov3_hub mlp.w12 = [w1; w2] (w1 the gate, as HF's gate_proj)",
                  max_diff(torch.cat([stored["blocks.0.mlp.w1.weight"], stored["blocks.0.mlp.w2.weight"]]),
                           canonical["blocks.0.mlp.w12.weight"]), 0)
    canonical = fx.family_weights(DINOV3["hf_dinov3"])
    try:
        hub.to_stored(dict(canonical, **{"blocks.0.attn.qkv.bias": canonical["blocks.0.attn.qkv.bias"] + 1}), 3)
        refused = False
    except AssertionError:
        refused = True
    unmasked = hub.to_canonical({"blocks.0.attn.qkv.bias": torch.arange(6.0)})
    check("dinov3_hub: a nonzero canonical k bias is refused (the mask would drop it); a bias without "
          "bias_mask is read as stored", 0 if refused and torch.equal(unmasked["blocks.0.attn.qkv.bias"],
                                                                   torch.arange(6.0)) else 1, 0)
    check("dinov3_hub: periods at head dim 16, theta 100 = 1, 10^0.5, 10, 10^1.5 (4j/16 exponents)",
          max_diff(hub.periods(16, 100.0), [1.0, 10 ** 0.5, 10.0, 10 ** 1.5]), 1e-13)

    on_disk = [(n, f, d) for n, f, d in tf.DINOV3_HUB if os.path.exists(os.path.join(FIXTURES, "torch", n))]
    if not on_disk:
        print("skip fixtures: tests/fixtures/torch/dinov3_hub*.pth not generated")
        return
    check(f"the {len(tf.DINOV3_HUB)} DINOv3 hub .pth fixtures make_torch_files writes are on disk",
          len(tf.DINOV3_HUB) - len(on_disk), 0)
    for name, folder, dtype in on_disk:
        path, model = os.path.join(FIXTURES, "torch", name), os.path.join(FIXTURES, "models", folder)
        try:
            _, shift = tf.assert_dinov3_hub(path, model, dtype)
            error = 0
        except AssertionError as e:
            print(e)
            shift, error = 0.0, 1
        check(f"torch/{name}: hub names, order, shapes, dtypes; mask, nonzero k third, periods; read with the "
              f"mask and w1 | w2 fused == models/{folder}'s canonical weights exactly; unmasked k moves every "
              f"output by {shift:.2e} > {tf.DINOV3_HUB_MASK_MARGIN:.0e}", error, 0)
        now = tf.dinov3_hub_state_dict(model, name, dtype)
        disk = torch.load(path, weights_only=True)
        same = list(now) == list(disk) and all(now[k].dtype == disk[k].dtype and torch.equal(now[k], disk[k])
                                               for k in now)
        check(f"torch/{name} is what make_torch_files writes now (every tensor bit for bit)", 0 if same else 1, 0)


# --- EVA-02 (docs/design.md, "Families"; timm Eva)
# --------------------------------------------------------------

EVA = {spec.name: spec for spec in fx.FAMILY_MODELS if spec.layout == "timm_eva"}
EVA_EPS = 1e-6  # timm.layers.LayerNorm's default, which Eva's norm_layer is


def eva_rope_timm(gh, gw, head_dim, ref_grid, temperature=10000.0):
    """(sin, cos) [gh*gw, head_dim] as timm's build_rotary_pos_embed(feat_shape=(gh, gw),
    dim=head_dim, in_pixels=False, ref_feat_shape=ref_grid) builds them, in float32 throughout:
    freq_bands(head_dim // 4, temperature, step=1); t = arange(s) / s * r per axis; meshgrid
    'ij'; pos = grid[..., None] * bands; sin / cos reshaped to [gh*gw, -1], repeat_interleave(2)."""
    num_bands = head_dim // 4
    bands = 1.0 / (temperature ** (torch.arange(0, num_bands, 1, dtype=torch.int64).to(torch.float32) / num_bands))
    t = [torch.arange(s, dtype=torch.int64).to(torch.float32) for s in (gh, gw)]
    t = [x / f * r for x, f, r in zip(t, (gh, gw), ref_grid)]
    grid = torch.stack(torch.meshgrid(t, indexing="ij"), dim=-1).unsqueeze(-1)
    pos = grid * bands
    sin, cos = pos.sin(), pos.cos()
    return (sin.reshape(gh * gw, -1).repeat_interleave(2, -1),
            cos.reshape(gh * gw, -1).repeat_interleave(2, -1))


def eva_rot_timm(x):
    """timm's rot: [x0 x1 x2 x3] -> [-x1 x0 -x3 x2]."""
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def eva_by_modules(folder, images):
    """timm's Eva forward rebuilt from torch.nn modules and the folder's timm-named tensors
    (float64; LayerNorm eps 1e-6 as timm's; config.json read as timm reads it: architecture
    eva02_* = use_rot_pos_emb with model_args.ref_feat_shape or 16 x 16, global_pool):
    Conv2d patch embedding, [CLS, patches] + pos_embed (patch rows resampled as timm's
    resample_abs_pos_embed: float32 bicubic with antialias), EvaBlock: EvaAttention (fused qkv
    with cat(q_bias, zeros, v_bias), or q_proj / k_proj / v_proj; the rope of `eva_rope_timm`
    applied as apply_rot_embed_cat to q, k of tokens 1..; softmax(q * scale @ k^T) v; attn.norm;
    proj), gamma_1, GluMlp (fc1 chunked, silu(x1) * x2, fc2) or SwiGLU (fc1_g, fc1_x, norm,
    fc2), gamma_2; norm; forward_head (avg: fc_norm(mean of tokens 1..); token: x[:, 0]) and
    head. -> cls (x_norm[:, 0]), patches, pooled (vitreg's: fc_norm(mean of the patches) or
    the mean of the normed patches), prenorm, head_input (timm's pre_logits), embedding
    (head(pre_logits), bias included) where there is a head."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    stored, _ = ref.read_safetensors(os.path.join(folder, "model.safetensors"))
    args = config.get("model_args", {})
    heads = args["num_heads"]
    rope_ref = args.get("ref_feat_shape", (16, 16)) if config["architecture"].startswith("eva02_") else None
    rope_ref = (rope_ref, rope_ref) if isinstance(rope_ref, int) else rope_ref
    f64 = torch.float64
    D, _, p, _ = stored["patch_embed.proj.weight"].shape
    hd = D // heads
    images = images.double()
    B, _, H, W = images.shape
    gh, gw = H // p, W // p
    depth = len({k.split(".")[1] for k in stored if k.startswith("blocks.")})

    def norm(prefix):
        weight = stored[prefix + ".weight"]
        m = torch.nn.LayerNorm(weight.shape[0], eps=EVA_EPS, dtype=f64)
        with torch.no_grad():
            m.weight.copy_(weight)
            m.bias.copy_(stored[prefix + ".bias"])
        return m

    def dense(prefix):
        weight = stored[prefix + ".weight"]
        m = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=prefix + ".bias" in stored, dtype=f64)
        with torch.no_grad():
            m.weight.copy_(weight)
            if m.bias is not None:
                m.bias.copy_(stored[prefix + ".bias"])
        return m

    with torch.no_grad():
        conv = torch.nn.Conv2d(3, D, p, stride=p, dtype=f64)
        conv.weight.copy_(stored["patch_embed.proj.weight"])
        conv.bias.copy_(stored["patch_embed.proj.bias"])
        x = conv(images).flatten(2).transpose(1, 2)
        x = torch.cat([stored["cls_token"].expand(B, -1, -1), x], dim=1)
        pos = stored["pos_embed"]
        M = math.isqrt(pos.shape[1] - 1)
        if (gh, gw) != (M, M):
            grid = pos[:, 1:].float().reshape(1, M, M, D).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(gh, gw), mode="bicubic", antialias=True, align_corners=False)
            pos = torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, gh * gw, D).double()], dim=1)
        x = x + pos
        if rope_ref is not None:
            sin, cos = (t.double() for t in eva_rope_timm(gh, gw, hd, rope_ref))
        N = x.shape[1]
        for i in range(depth):
            b = f"blocks.{i}"
            y = norm(b + ".norm1")(x)
            if b + ".attn.qkv.weight" in stored:
                bias = torch.cat([stored[b + ".attn.q_bias"], torch.zeros(D, dtype=f64), stored[b + ".attn.v_bias"]])
                qkv = F.linear(y, stored[b + ".attn.qkv.weight"], bias)
                q, k, v = qkv.reshape(B, N, 3, heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
            else:
                q, k, v = (dense(f"{b}.attn.{n}_proj")(y).reshape(B, N, heads, -1).transpose(1, 2) for n in "qkv")
            if rope_ref is not None:
                q = torch.cat([q[:, :, :1], q[:, :, 1:] * cos + eva_rot_timm(q[:, :, 1:]) * sin], 2)
                k = torch.cat([k[:, :, :1], k[:, :, 1:] * cos + eva_rot_timm(k[:, :, 1:]) * sin], 2)
            a = torch.softmax((q * hd ** -0.5) @ k.transpose(-2, -1), dim=-1) @ v
            a = a.transpose(1, 2).reshape(B, N, D)
            if b + ".attn.norm.weight" in stored:
                a = norm(b + ".attn.norm")(a)
            a = dense(b + ".attn.proj")(a)
            x = x + (stored[b + ".gamma_1"] * a if b + ".gamma_1" in stored else a)
            y = norm(b + ".norm2")(x)
            if b + ".mlp.fc1_g.weight" in stored:
                h = F.silu(dense(b + ".mlp.fc1_g")(y)) * dense(b + ".mlp.fc1_x")(y)
            else:
                x1, x2 = dense(b + ".mlp.fc1")(y).chunk(2, dim=-1)
                h = F.silu(x1) * x2
            if b + ".mlp.norm.weight" in stored:
                h = norm(b + ".mlp.norm")(h)
            m = dense(b + ".mlp.fc2")(h)
            x = x + (stored[b + ".gamma_2"] * m if b + ".gamma_2" in stored else m)
        prenorm = x
        xn = norm("norm")(x) if "norm.weight" in stored else x
        if config["global_pool"] == "avg":
            head_input = norm("fc_norm")(xn[:, 1:].mean(dim=1))
            pooled = head_input
        else:
            head_input = xn[:, 0]
            pooled = xn[:, 1:].mean(dim=1)
        out = {"cls": xn[:, 0], "patches": xn[:, 1:], "pooled": pooled, "prenorm": prenorm,
               "head_input": head_input}
        if "head.weight" in stored:
            out["embedding"] = dense("head")(head_input)
    return out


def check_eva():
    """EVA-02 (docs/design.md, "Families"; timm Eva, layout timm_eva, family eva): (a) the interleaved rotation is
    the complex product of the pairs (2i, 2i+1) with e^(i angle), the tables equal timm's
    float32 construction and the angles by hand (float64); (b) with every angle 0 the EVA
    attention is the plain attention of the same canonical weights (and the whole forward the
    learned-position forward); (c) the timm_eva layout round trips, stored -> canonical -> stored
    (names and values) and canonical -> stored -> canonical, for the three fixtures, with timm's
    names exactly (make_fixtures' eva_names); the packed fc1 is [gate; value]; a nonzero k bias
    is refused; EVA-01's GELU fc1 / fc2 stays fc1 / fc2; (d) the config the folders give; (e) the
    reference against timm's Eva rebuilt from torch.nn modules on the stored timm tensors (the
    fixture folders at four grids each; the fixture cases on disk), the EVA-CLIP embedding being
    timm's head output; (f) detection, the timm config rules (eva02_ default ref 16 x 16, an int
    ref, eva_ learned, a null ref refused) and config_record's defaults."""
    g = torch.Generator().manual_seed(17)
    # (a) the rotation as complex numbers; the tables
    worst_complex = worst_tables = worst_timm = 0.0
    for gh, gw, hd, ref_grid in ((4, 4, 16, (16, 16)), (3, 5, 16, (6, 6)), (2, 7, 8, (16, 16)), (5, 3, 32, (14, 9))):
        cos, sin = ref.rope_eva_tables(gh, gw, hd, 1e4, ref_grid)
        t = torch.randn(2, 3, 1 + gh * gw, hd, generator=g, dtype=torch.float64)
        mine = ref.apply_rope(t, (cos, sin, "pairs"))
        angle = torch.atan2(sin[:, ::2], cos[:, ::2])                       # [P, hd/2]
        z = torch.view_as_complex(t[..., 1:, :].reshape(2, 3, gh * gw, hd // 2, 2).contiguous())
        turned = torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).reshape(2, 3, gh * gw, hd)
        worst_complex = max(worst_complex, max_diff(mine[..., 1:, :], turned), max_diff(mine[..., :1, :], t[..., :1, :]))
        by_hand = torch.zeros(gh * gw, hd // 2, dtype=torch.float64)
        for r in range(gh):
            for c in range(gw):
                for i in range(hd // 2):
                    axis, f = divmod(i, hd // 4)
                    position = r / gh * ref_grid[0] if axis == 0 else c / gw * ref_grid[1]
                    by_hand[r * gw + c, i] = position * 1e4 ** (-f / (hd // 4))
        worst_tables = max(worst_tables, max_diff(cos[:, ::2], torch.cos(by_hand)), max_diff(sin[:, ::2], torch.sin(by_hand)),
                           max_diff(cos[:, 1::2], cos[:, ::2]), max_diff(sin[:, 1::2], sin[:, ::2]))
        timm_sin, timm_cos = eva_rope_timm(gh, gw, hd, ref_grid)
        worst_timm = max(worst_timm, max_diff(cos, timm_cos.double()), max_diff(sin, timm_sin.double()))
    check("(a) EVA rotation == the pairs (2i, 2i+1) as complex numbers times e^(i angle); CLS unrotated "
          "(4 grids, head dims 8-32)", worst_complex, 1e-14)
    check("(a) EVA tables == angles by hand in float64 (t = i / n * R per axis, y bands then x bands, "
          "each repeated in place; float32 angles as timm's)", worst_tables, 1e-5)
    check("(a) EVA tables == timm's float32 build_rotary_pos_embed (cos / sin of its float32 angles "
          "in float64 vs float32)", worst_timm, 1e-6)
    q = torch.randn(1, 1, 3, 8, generator=g, dtype=torch.float64)
    by_pairs = torch.stack([-q[..., 1::2], q[..., ::2]], dim=-1).reshape(q.shape)
    check("(a) rotate_pairs([x0..x7]) = [-x1, x0, -x3, x2, ...]",
          max_diff(ref.rotate_pairs(q), torch.cat([torch.stack([-q[..., 2 * i + 1], q[..., 2 * i]], -1)
                                                   for i in range(4)], -1)) + max_diff(ref.rotate_pairs(q), by_pairs), 0)

    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: siglip_folder(s, tmp) for name, s in EVA.items()}
        loaded = {name: ref.load_model(folder) for name, folder in folders.items()}

        # (b) every angle 0: the plain attention of the same weights; the forward with learned positions
        worst_attn = worst_forward = 0.0
        for name, (cfg, w) in loaded.items():
            plain = replace(cfg, positions="learned", rope_theta=0.0, rope_ref_grid=(0, 0), family="timm")
            for gh, gw in ((cfg.grid, cfg.grid), (3, 5), (5, 2)):
                x = torch.randn(2, 1 + gh * gw, cfg.dim, generator=g, dtype=torch.float64)
                for layer in range(cfg.depth):
                    with ref.rotation_disabled():
                        a = ref.attention(x, w, f"blocks.{layer}.attn", cfg, rope=ref.rope_for(cfg, gh, gw))
                    b = ref.attention(x, w, f"blocks.{layer}.attn", plain, rope=None)
                    worst_attn = max(worst_attn, *(max_diff(u, v) for u, v in zip(a, b)))
                images = torch.randn(2, 3, gh * cfg.patch, gw * cfg.patch, generator=g)
                with ref.rotation_disabled():
                    a = ref.forward(cfg, w, images, trace=True)
                worst_forward = max(worst_forward, forward_difference(a, ref.forward(plain, w, images, trace=True)))
        check("(b) EVA attention with every angle 0 == the plain attention of the same canonical weights "
              "(output, probabilities, logits; 3 models, 3 grids, every layer)", worst_attn, 1e-12)
        check("(b) EVA forward with every angle 0 == the learned-position forward, trace too", worst_forward, 1e-12)

        # (c) the layout both ways
        layout = ref.TimmEvaLayout
        for name, s in EVA.items():
            stored, _ = ref.read_safetensors(os.path.join(folders[name], "model.safetensors"))
            check(f"{name}: the stored names are exactly timm Eva's ({len(stored)} tensors)",
                  len(set(stored) ^ fx.eva_names(s)), 0)
            head = s.proj_dim > 0
            canonical = layout.to_canonical(stored, head_is_projection=head)
            again = layout.to_stored(canonical, **layout.stored_options(stored))
            same = sorted(again) == sorted(stored)
            check(f"{name}: timm_eva stored -> canonical -> stored names", 0 if same else 1, 0)
            if same:
                check(f"{name}: timm_eva stored -> canonical -> stored values",
                      max(max_diff(again[k], stored[k]) for k in stored), 0)
            weights = fx.family_weights(s)
            back = layout.to_canonical(layout.to_stored(weights, qkv_fused=not s.eva_split, packed_mlp=not s.eva_split),
                                       head_is_projection=head)
            same = sorted(back) == sorted(weights)
            check(f"{name}: timm_eva canonical -> stored -> canonical names", 0 if same else 1, 0)
            if same:
                check(f"{name}: timm_eva canonical -> stored -> canonical values (k bias rows 0)",
                      max(max_diff(back[k], weights[k]) for k in weights), 0)
            D = s.dim
            bias = canonical["blocks.0.attn.qkv.bias"]
            if s.eva_split:
                parts = (stored["blocks.0.attn.q_proj.weight"], stored["blocks.0.attn.k_proj.weight"],
                         stored["blocks.0.attn.v_proj.weight"])
                biases = (stored["blocks.0.attn.q_proj.bias"], stored["blocks.0.attn.v_proj.bias"])
                w12 = torch.cat([stored["blocks.0.mlp.fc1_g.weight"], stored["blocks.0.mlp.fc1_x.weight"]])
            else:
                parts = stored["blocks.0.attn.qkv.weight"].chunk(3)
                biases = (stored["blocks.0.attn.q_bias"], stored["blocks.0.attn.v_bias"])
                w12 = stored["blocks.0.mlp.fc1.weight"]
            error = (max_diff(canonical["blocks.0.attn.qkv.weight"], torch.cat(parts))
                     + max_diff(bias, torch.cat([biases[0], torch.zeros(D, dtype=torch.float64), biases[1]]))
                     + max_diff(canonical["blocks.0.mlp.w12.weight"], w12))
            check(f"{name}: qkv = [q; k; v], qkv bias = [q; 0; v], w12 = [gate; value] "
                  f"({'fc1_g; fc1_x' if s.eva_split else 'fc1 as stored'})", error, 0)
        weights = fx.family_weights(EVA["timm_eva02_small"])
        nonzero = dict(weights, **{"blocks.0.attn.qkv.bias": weights["blocks.0.attn.qkv.bias"] + 1})
        try:
            layout.to_stored(nonzero)
            refused = False
        except AssertionError:
            refused = True
        stored = layout.to_stored(weights)
        k_bias = torch.full((EVA["timm_eva02_small"].dim,), 0.5, dtype=torch.float64)
        read = layout.to_canonical(dict(stored, **{"blocks.0.attn.k_bias": k_bias}))
        check("timm_eva: a nonzero k bias is refused; a stored k_bias buffer is read as the k rows",
              0 if refused and torch.equal(read["blocks.0.attn.qkv.bias"][48:96], k_bias) else 1, 0)
        gelu = {k: v for k, v in weights.items() if ".mlp." not in k}
        for i in range(EVA["timm_eva02_small"].depth):
            gelu[f"blocks.{i}.mlp.fc1.weight"] = torch.randn(96, 48, generator=g, dtype=torch.float64)
            gelu[f"blocks.{i}.mlp.fc1.bias"] = torch.randn(96, generator=g, dtype=torch.float64)
            gelu[f"blocks.{i}.mlp.fc2.weight"] = torch.randn(48, 96, generator=g, dtype=torch.float64)
            gelu[f"blocks.{i}.mlp.fc2.bias"] = torch.randn(48, generator=g, dtype=torch.float64)
        stored = layout.to_stored(gelu)
        back = layout.to_canonical(stored)
        check("timm_eva: EVA-01's GELU mlp.fc1 / fc2 (fc1 as wide as fc2's input) stay fc1 / fc2 both ways",
              0 if sorted(back) == sorted(gelu) and ref.detect_layout(stored) is layout
              and all(torch.equal(back[k], gelu[k]) for k in gelu) else 1, 0)

        # (d) the config the folders give
        for name, (cfg, w) in loaded.items():
            s = EVA[name]
            expected = dict(family="eva", positions="rope_eva", rope_theta=1e4, class_token=True, pos_embed_class=True,
                            pre_norm=False, final_norm=not s.fc_norm, fc_norm=s.fc_norm, proj_dim=s.proj_dim,
                            mlp="swiglu", eps=1e-6, pos_interp="antialias", pool="avg", eval_squash=False,
                            mean=ref.CLIP_MEAN, std=ref.CLIP_STD, input_size=s.grid * s.patch,
                            crop_pct=1.0 if s.proj_dim else 0.9, heads=3, dim=48, grid=s.grid, patch=s.patch,
                            depth=2, registers=0, attention="softmax", mlp_norm=s.mlp_norm, attn_norm=s.attn_norm,
                            rope_ref_grid=(6, 6) if name == "timm_eva02_base" else (16, 16))
            wrong = [k for k, value in expected.items() if getattr(cfg, k) != value]
            check(f"{name}: the config timm Eva's files give ({wrong})", len(wrong), 0)

        # (e) against timm's Eva rebuilt from torch.nn modules
        worst = 0.0
        for name, folder in folders.items():
            cfg, w = loaded[name]
            for gh, gw in ((cfg.grid, cfg.grid), (3, 5), (5, 3), (2, 6)):
                x = torch.randn(2, 3, gh * cfg.patch, gw * cfg.patch, generator=torch.Generator().manual_seed(gh * 7 + gw))
                a, b = ref.forward(cfg, w, x), eva_by_modules(folder, x)
                keys = ["cls", "patches", "pooled", "prenorm"] + (["embedding"] if cfg.proj_dim else [])
                worst = max(worst, *(relative_difference(a[k], b[k]) for k in keys))
                if cfg.fc_norm:  # the avg-pool models' pooled is timm's pre_logits
                    worst = max(worst, relative_difference(a["pooled"], b["head_input"]))
        check("(e) EVA reference == timm's Eva from torch.nn modules on the stored timm tensors (cls, patches, "
              "pooled, prenorm, the EVA-CLIP embedding = head(norm(CLS)); 3 folders, 4 grids; relative)", worst, 1e-6)
        cases, worst_stored = 0, 0.0
        for entry, case in stored_cases(lambda e: e["layout"] == "timm_eva"):
            cases += 1
            b = eva_by_modules(os.path.join(FIXTURES, entry["model"]), case["input"])
            keys = ["cls", "patches", "pooled"] + (["embedding"] if "embedding" in case else [])
            worst_stored = max(worst_stored, relative_difference(case["prenorm_last"], b["prenorm"]),
                               *(relative_difference(case[k], b[k]) for k in keys))
        if fixture_index("cases.json") is not None:
            want = sum(len(s.sizes) for s in EVA.values())
            check(f"the {want} EVA fixture cases make_fixtures writes are on disk", abs(cases - want), 0)
            check("EVA fixture cases == timm's Eva from torch.nn modules (relative)", worst_stored, 1e-6)

        # (f) detection and the config rules
        detected = 0
        for name, folder in folders.items():
            stored, _ = ref.read_safetensors(os.path.join(folder, "model.safetensors"))
            detected += ref.detect_layout(stored) is ref.TimmEvaLayout
        others = [os.path.join(FIXTURES, "models", f) for f in ("timm_deit3", "timm_avg_fcnorm", "timm_clip_f16.safetensors",
                                                                "dinov2_swiglu_f32.safetensors")]
        for path in others:
            if os.path.exists(path):
                stored, _ = ref.read_safetensors(os.path.join(path, "model.safetensors") if os.path.isdir(path) else path)
                detected += ref.detect_layout(stored) is not ref.TimmEvaLayout
        present = sum(os.path.exists(p) for p in others)
        check(f"detect: the 3 EVA files are timm_eva (by q_bias / q_proj, fc1_g, gamma_1, or a packed fc1); "
              f"{present} timm / dinov2 SwiGLU files are not", len(folders) + present - detected, 0)
    hints = ref.hints_from_timm_config({"architecture": "eva02_large_patch14_448"})
    as_int = ref.hints_from_timm_config({"architecture": "eva02_tiny_patch14_336", "model_args": {"ref_feat_shape": 24}})
    eva01 = ref.hints_from_timm_config({"architecture": "eva_giant_patch14_224"})
    clip = ref.hints_from_timm_config({"architecture": "eva02_large_patch14_clip_224"})
    try:
        ref.hints_from_timm_config({"architecture": "eva02_small_patch14_224", "model_args": {"ref_feat_shape": None}})
        refused = False
    except ValueError:
        refused = True
    rules = (hints["family"] == "eva" and hints["positions"] == "rope_eva" and hints["rope_ref_grid"] == (16, 16)
             and hints["rope_theta"] == 1e4 and as_int["rope_ref_grid"] == (24, 24)
             and eva01["family"] == "eva" and eva01["positions"] == "learned" and "rope_ref_grid" not in eva01
             and clip["family"] == "eva" and clip["positions"] == "rope_eva" and refused)
    check("timm config: eva02_* -> eva, rope_eva, ref 16 x 16 (an int ref_feat_shape both axes), eva_* -> learned, "
          "eva02_*clip* is eva (not clip); a null ref_feat_shape refused", 0 if rules else 1, 0)
    plain = ref.Config(dim=4, depth=1, heads=1, patch=1, registers=0, grid=1)
    check("config_record: rope_ref_grid, mlp_norm and attn_norm absent at their defaults",
          len({"rope_ref_grid", "mlp_norm", "attn_norm"} & set(ref.config_record(plain))), 0)


# --- e. trace invariants and rollout ------------------------------------------------------------

def check_trace_invariants():
    spec = fx.ModelSpec("check_trace", "dinov2", registers=2, sinks=True)
    w = fx.random_weights(spec)
    x = torch.randn(1, 3, 12, 28, generator=torch.Generator().manual_seed(11))
    for kind in ref.ATTENTION_KINDS:
        out = ref.forward(spec_config(spec, attention=kind), w, x, trace=True)
        t = out["trace"]
        attn, abstention = t["attn"], t["abstention"]
        row_sums = attn.sum(dim=-1)
        if kind == "softmax":
            check("softmax: attention rows sum to 1", max_diff(row_sums, 1), 1e-12)
            check("softmax: abstention is 0", abstention.abs().max().item(), 0)
        else:
            check(f"{kind}: attention rows sum to 1 - abstention",
                  max_diff(row_sums, 1 - abstention), 1e-12)
            check(f"{kind}: abstention in (0, 1)",
                  0 if 0 < abstention.min() and abstention.max() < 1 else 1, 0)
        check(f"{kind}: key_mass is the column mean of attn",
              max_diff(t["key_mass"], attn.sum(dim=-2) / attn.shape[-1]), 1e-15)
        check(f"{kind}: last layer's norms are the prenorm token norms",
              max_diff(t["norms"][:, -1], out["prenorm"].norm(dim=-1)), 1e-12)
        check(f"{kind}: last block output is prenorm",
              max_diff(t["blocks"][:, -1], out["prenorm"]), 0)
        R = spec.registers
        last = t["blocks_normed"][:, -1]
        check(f"{kind}: last normed block output is cls, registers, patches",
              max(max_diff(last[:, 0], out["cls"]), max_diff(last[:, 1:1 + R], out["registers"]),
                  max_diff(last[:, 1 + R:], out["patches"])), 0)
        worst = max(max_diff(ref.rollout(attn[0], fuse, discard).sum(dim=-1), 1)
                    for fuse in ref.HEAD_FUSIONS for discard in (0.0, 0.5, 0.9))
        check(f"{kind}: rollout rows sum to 1 (every fusion, discard 0 / 0.5 / 0.9)", worst, 1e-12)


def check_rollout_by_hand():
    def layers(*mats):  # one head per layer: [L, 1, N, N]
        return torch.tensor([[m] for m in mats], dtype=torch.float64)

    A = [[.5, .3, .2], [.1, .8, .1], [.2, .2, .6]]
    B = [[.6, .2, .2], [.2, .6, .2], [0., 0., 1.]]
    # (A + I) rows sum to 2: [[1.5,.3,.2],[.1,1.8,.1],[.2,.2,1.6]] / 2
    A_hat = [[.75, .15, .1], [.05, .9, .05], [.1, .1, .8]]
    check("rollout by hand: 1 layer, 1 head", max_diff(ref.rollout(layers(A)), A_hat), 1e-15)
    # layers A then B: B_hat A_hat, B_hat = [[.8,.1,.1],[.1,.8,.1],[0,0,1]] (A_hat B_hat differs)
    check("rollout by hand: 2 layers, B_hat @ A_hat",
          max_diff(ref.rollout(layers(A, B)),
                   [[.615, .22, .165], [.125, .745, .13], [.1, .1, .8]]), 1e-14)
    # discard 0.5 zeroes floor(4.5) = 4 of A: the 0.1s at [1,0], [1,2], then the first two 0.2s in
    # row-major order, [0,2] and [2,0] ([2,1] stays); every row of F + I then sums to 1.8
    check("rollout by hand: discard 0.5, ties broken in row-major order",
          max_diff(ref.rollout(layers(A), discard=0.5),
                   [[1.5 / 1.8, .3 / 1.8, 0], [0, 1, 0], [0, .2 / 1.8, 1.6 / 1.8]]), 1e-15)
    # discard 0.34 picks floor(3.06) = 3 smallest of C: [0,0], [2,2], [2,0]; [0,0] is kept
    C = [[.1, .5, .4], [.3, .3, .4], [.2, .7, .1]]
    check("rollout by hand: discard never zeroes [0,0]",
          max_diff(ref.rollout(layers(C), discard=0.34),
                   [[.55, .25, .2], [.15, .65, .2], [0, .7 / 1.7, 1 / 1.7]]), 1e-15)
    # A and B as two heads of one layer
    two_heads = torch.tensor([[A, B]], dtype=torch.float64)
    fused = {"mean": [[1.55 / 2, .25 / 2, .2 / 2], [.15 / 2, 1.7 / 2, .15 / 2],
                      [.1 / 2, .1 / 2, 1.8 / 2]],
             "max": [[1.6 / 2.1, .3 / 2.1, .2 / 2.1], [.2 / 2.2, 1.8 / 2.2, .2 / 2.2],
                     [.2 / 2.4, .2 / 2.4, 2 / 2.4]],
             "min": [[1.5 / 1.9, .2 / 1.9, .2 / 1.9], [.1 / 1.8, 1.6 / 1.8, .1 / 1.8], [0, 0, 1]]}
    for fuse, expected in fused.items():
        check(f"rollout by hand: heads fused by {fuse}",
              max_diff(ref.rollout(two_heads, fuse), expected), 1e-15)


# --- f. fixtures on disk ------------------------------------------------------------------------

def fixture_index(name):
    """tests/fixtures/NAME parsed, or None (said) when the fixtures are not generated."""
    path = os.path.join(FIXTURES, name)
    if not os.path.exists(path):
        print(f"skip fixtures: tests/fixtures/{name} not generated")
        return None
    with open(path) as f:
        return json.load(f)


def check_fixtures():
    index = fixture_index("cases.json")
    if index is None:
        return
    worst = 0.0
    for entry in index:
        cfg, w = ref.load_model(os.path.join(FIXTURES, entry["model"]),
                                entry["attention_override"], entry["pos_interp_override"])
        stored, _ = ref.read_safetensors(os.path.join(FIXTURES, entry["case"]))
        out = ref.forward(cfg, w, stored["input"])
        names = {"cls": "cls", "patches": "patches", "prenorm": "prenorm_last"}
        if cfg.registers:
            names["registers"] = "registers"
        names.update({k: k for k in ("pooled", "embedding") if k in stored})
        worst = max(worst, max(max_diff(out[k], stored[n]) for k, n in names.items()))
    check(f"{len(index)} fixture cases match the reference", worst, 1e-6)

    with open(os.path.join(FIXTURES, "traces.json")) as f:
        traces = json.load(f)
    worst = 0.0
    for entry in traces:
        cfg, w = ref.load_model(os.path.join(FIXTURES, entry["model"]))
        stored, metadata = ref.read_safetensors(os.path.join(FIXTURES, entry["file"]))
        expected = fx.trace_tensors(cfg, w, stored["input"])
        if sorted(stored) != sorted(expected):
            check(f"{entry['file']} holds the trace tensors", 1, 0)
            continue
        for k, v in expected.items():  # relative to the magnitude: planted norms reach ~400
            worst = max(worst, max_diff(stored[k] / v.abs().clamp(min=1), v / v.abs().clamp(min=1)))
        if "artifacts" in entry:
            check_planted(entry, stored, metadata)
    check(f"{len(traces)} trace fixtures match the reference (relative)", worst, 1e-6)


def check_upsample_fixture():
    path = os.path.join(FIXTURES, "upsample.safetensors")
    if not os.path.exists(path):
        print("skip fixtures: tests/fixtures/upsample.safetensors not generated")
        return
    stored, _ = ref.read_safetensors(path)
    check("upsample.safetensors holds src and the sizes make_fixtures names",
          0 if sorted(stored) == sorted(["src", *fx.UPSAMPLE_SIZES]) else 1, 0)
    check("upsample.safetensors matches the bilinear formula",
          max(max_diff(stored[name], bilinear_upsample(stored["src"], h, w))
              for name, (h, w) in fx.UPSAMPLE_SIZES.items() if name in stored), 2e-6)  # float32


def check_dense_set():
    """Every object of the dense set is one flat colour over exactly the pixels its mask labels
    (inside its bounding box), the masks label nothing else, and the counts match classes.json."""
    folder = os.path.join(FIXTURES, "dense")
    if not os.path.exists(os.path.join(folder, "classes.json")):
        print("skip fixtures: tests/fixtures/dense not generated")
        return
    with open(os.path.join(folder, "classes.json")) as f:
        index = json.load(f)
    wrong, counts = 0, np.zeros(len(index["classes"]), dtype=np.int64)
    for entry in index["images"]:
        image = np.array(decode_png(os.path.join(folder, entry["image"]))[2], dtype=np.uint8)
        mask = np.array(decode_png(os.path.join(folder, entry["mask"]))[2], dtype=np.uint8)[..., 0]
        counts += np.bincount(mask.ravel(), minlength=len(counts))
        for obj in entry["objects"]:
            top, left, bottom, right = obj["bbox"]
            inside = mask[top:bottom, left:right] == obj["label"]
            wrong += int(inside.sum() != obj["pixels"]
                         or len(np.unique(image[top:bottom, left:right][inside], axis=0)) != 1)
        wrong += int((mask > 0).sum() != sum(obj["pixels"] for obj in entry["objects"]))
    check(f"dense set: {len(index['images'])} masks label exactly their flat-coloured objects",
          wrong, 0)
    check("dense set: pixels per class match classes.json",
          0 if counts.tolist() == index["pixels_per_class"] else 1, 0)


def check_planted(entry, stored, metadata):
    """The planted fixture's artifacts are exactly the tokens above its threshold from its
    block on (none before), and its metadata states the norms the stored trace shows."""
    norms, threshold = stored["norms"], float(metadata["threshold"])
    block = int(metadata["planted_block"])
    artifacts = [int(t) for t in metadata["artifacts"].split(",")]
    above = [[t for t in range(row.numel()) if row[t] > threshold] for row in norms]
    check("planted: tokens above the threshold per layer are the artifacts from its block on",
          0 if above == [artifacts if layer >= block else [] for layer in range(len(norms))]
          and artifacts == entry["artifacts"] else 1, 0)
    others = [t for t in range(norms.shape[-1]) if t not in artifacts]
    lo = [float(v) for v in metadata["artifact_min_norm"].split(",")]
    hi = [float(v) for v in metadata["other_max_norm"].split(",")]
    check("planted: artifact_min_norm / other_max_norm metadata match the stored norms",
          max(max_diff(norms[:, artifacts].amin(dim=1), lo),
              max_diff(norms[:, others].amax(dim=1), hi)),
          1e-3)
    grid = [tuple(map(int, cell.split(","))) for cell in metadata["artifact_grid"].split(";")]
    check("planted: artifact_grid cells are the artifact tokens (1 + row * 4 + col)",
          0 if sorted(1 + r * fx.GRID + c for r, c in grid) == artifacts else 1, 0)


# --- g. interventions (docs/design.md, "Interventions and the study")
# ---------------------------------------------------------------

def check_intervention_helpers_by_hand():
    mass = torch.tensor([[[[0.2, 0.4, 0.4, 0.0], [0.5, 0.1, 0.2, 0.2]]]], dtype=torch.float64)
    check("sink_keys: argmax of key_mass, the lowest index on ties",
          0 if ref.sink_keys({"key_mass": mass}).tolist() == [[[1, 0]]] else 1, 0)

    def prenorm(norms, registers):  # token t = [norm_t, 0]; CLS and registers at norm 1000
        values = [1000.0] * (1 + registers) + list(norms)
        return torch.tensor([[[v, 0.0] for v in values]], dtype=torch.float64)
    # 6 patches (even): median (3 + 4) / 2 = 3.5, |dev| .5 .5 1.5 1.5 2.5 96.5 -> MAD 1.5
    even = prenorm([1, 2, 3, 4, 5, 100], registers=1)
    got = [ref.artifact_tokens(even, 1, k)[0] for k in (10.0, 1.0, 0.5)]
    check("artifact_tokens, even count: thresholds 18.5 / 5 (strict >) / 4.25 by hand",
          0 if got == [[7], [7], [6, 7]] else 1, 0)
    # 5 patches (odd): median 3, |dev| 0 1 1 2 97 -> MAD 1; k = 1 gives 4, and 4 is not > 4
    odd = prenorm([4, 1, 3, 100, 2], registers=2)
    check("artifact_tokens, odd count: threshold 4 by hand, token indices after the registers",
          0 if ref.artifact_tokens(odd, 2, 1.0) == [[6]] else 1, 0)
    # no class token (prefix 0): the same tokens minus the CLS row, indices one lower
    check("artifact_tokens, no class token: the patches start right after the registers",
          0 if ref.artifact_tokens(odd[:, 1:], 2, 1.0, prefix=0) == [[5]] else 1, 0)

    keys = torch.tensor([[[1, 3]], [[2, 2]]])                            # [B=2, L=1, h=2]
    mask = ref.eviction_mask(2, 1, 2, 5, tokens=[0], per_image=[[4], []], per_head=keys)
    want = torch.zeros(2, 1, 2, 5, dtype=torch.bool)
    want[..., 0] = True
    want[0, ..., 4] = True
    want[0, 0, 0, 1] = want[0, 0, 1, 3] = want[1, 0, 0, 2] = want[1, 0, 1, 2] = True
    check("eviction_mask: the union of tokens, per_image and per_head",
          0 if torch.equal(mask, want) else 1, 0)


def check_interventions():
    """Eviction and test-time registers against the plain forward and the rules of docs/design.md, "Interventions and the study"."""
    spec = fx.ModelSpec("check_trace", "dinov2", registers=2, sinks=True)
    w = fx.random_weights(spec)
    x = torch.randn(2, 3, 12, 28, generator=torch.Generator().manual_seed(13))
    R = spec.registers
    for kind in ref.ATTENTION_KINDS:
        cfg = spec_config(spec, attention=kind)
        plain = ref.forward(cfg, w, x, trace=True)
        B, N = plain["prenorm"].shape[:2]
        shape = (B, cfg.depth, cfg.heads, N)
        same = ref.forward(cfg, w, x, trace=True, intervention=ref.Intervention(
            evict=torch.zeros(shape, dtype=torch.bool), ttr=0))
        check(f"{kind}: an empty eviction mask and K = 0 give the plain forward exactly",
              forward_difference(plain, same), 0)

        mask = ref.eviction_mask(*shape, tokens=[0, 1 + R + 1 * 7 + 2],
                                 per_head=ref.sink_keys(plain["trace"]))
        t = ref.forward(cfg, w, x, trace=True, intervention=ref.Intervention(evict=mask))["trace"]
        attn, abstention, logits = t["attn"], t["abstention"], t["logits"]
        columns = mask[..., None, :].expand_as(attn)
        check(f"{kind} evicting: evicted columns are exactly 0", attn[columns].abs().max().item(), 0)
        check(f"{kind} evicting: layer 0 logits are the plain forward's (recorded before the mask)",
              max_diff(logits[:, 0], plain["trace"]["logits"][:, 0]), 0)
        # docs/design.md, "Interventions and the study" written out: p = e^z [k kept] / (null +
        # sum_kept e^z), null e^s (softmax: 0)
        null = torch.zeros(B, cfg.depth, cfg.heads, 1, 1, dtype=torch.float64)
        if kind != "softmax":
            sinks = torch.stack([w[f"blocks.{i}.attn.sinks"] for i in range(cfg.depth)])
            null = torch.exp(sinks if kind == "sink" else 0 * sinks)[None, :, :, None, None]
            null = null.expand(B, -1, -1, 1, 1)
        kept = torch.exp(logits) * ~columns
        denominator = null + kept.sum(dim=-1, keepdim=True)
        check(f"{kind} evicting: attention == e^z [kept] / (null + sum over kept keys of e^z)",
              max_diff(attn, kept / denominator), 1e-13)
        check(f"{kind} evicting: abstention == null / (null + sum over kept keys of e^z)",
              max_diff(abstention, (null / denominator)[..., 0]), 1e-13)
        rows = attn.sum(dim=-1)
        if kind == "softmax":
            check("softmax evicting: rows still sum to 1 (evicted tokens' own rows too)",
                  max_diff(rows, 1), 1e-12)
        else:
            check(f"{kind} evicting: rows sum to 1 - abstention", max_diff(rows, 1 - abstention), 1e-12)
            rise = (abstention[:, 0] - plain["trace"]["abstention"][:, 0]).min().item()
            check(f"{kind} evicting: layer 0 abstention rises for every query (min rise {rise:.2e})",
                  0 if rise > 0 else 1, 0)

    for spec in (fx.ModelSpec("check_trace", "dinov2", registers=2, sinks=True),
                 fx.ModelSpec("check_swiglu", "dinov2", mlp="swiglu")):
        cfg = spec_config(spec, attention="sink" if spec.sinks else "softmax")
        w = fx.random_weights(spec)
        R, K = spec.registers, 3
        plain = ref.forward(cfg, w, x)
        out = ref.forward(cfg, w, x, trace=True, intervention=ref.Intervention(ttr=K))
        check(f"{spec.mlp} R={R}: K = 3 test-time registers: registers [B, R+K, D], patches "
              f"and prenorm hold K more tokens",
              0 if (out["registers"].shape == (2, R + K, cfg.dim)
                    and out["patches"].shape == plain["patches"].shape
                    and out["prenorm"].shape[1] == plain["prenorm"].shape[1] + K
                    and out["trace"]["attn"].shape[-1] == plain["prenorm"].shape[1] + K) else 1, 0)
        tokens = ref.embed(x.double(), w, cfg, K)
        check(f"{spec.mlp} R={R}: test-time registers start at zero, between registers and patches",
              max(tokens[:, 1 + R:1 + R + K].abs().max().item(),
                  max_diff(tokens[:, 1 + R + K:], ref.embed(x.double(), w, cfg)[:, 1 + R:]),
                  max_diff(tokens[:, :1 + R], ref.embed(x.double(), w, cfg)[:, :1 + R])), 0)
        neurons = ((1, 5), (1, 9), (0, 3), (1, 5))
        t = ref.forward(cfg, w, x, trace=True,
                        intervention=ref.Intervention(ttr=K, neurons=neurons))["trace"]
        worst = 0.0
        for layer in range(cfg.depth):  # recompute the layer's hidden from its input, unedited
            b = f"blocks.{layer}"
            xin = tokens if layer == 0 else t["blocks"][:, layer - 1]
            a = ref.attention(ref.layer_norm(xin, w, b + ".norm1", cfg.eps), w, b + ".attn", cfg)[0]
            xmid = xin + w[b + ".ls1.gamma"] * a
            hidden = ref.mlp(ref.layer_norm(xmid, w, b + ".norm2", cfg.eps), w, b + ".mlp", cfg)[1]
            want = hidden.clone()
            for n in {n for l, n in neurons if l == layer}:
                want[:, 1 + R:1 + R + K, n] = hidden[:, :, n].amax(dim=1)[:, None]
                want[:, 1 + R + K:, n] = 0
            worst = max(worst, max_diff(t["mlp_hidden"][:, layer], want))
        check(f"{spec.mlp} R={R}: register neurons: test-time rows = max over all tokens before "
              f"editing, patches 0, CLS / registers / other units unchanged", worst, 0)


def check_sink_calibration():
    spec = fx.ModelSpec("check_calibrate", "dinov2")
    cfg, w = spec_config(spec), fx.random_weights(spec)
    images = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(17))
    sinks, target, keys = ref.calibrate_sink(cfg, w, images)
    traces = [ref.forward(cfg, w, image, trace=True)["trace"] for image in ref.image_list(images)]
    logits = [tr["logits"][0] for tr in traces]

    def mass(s):
        return ref.sink_calibration_mass(logits, keys, torch.as_tensor(s, dtype=torch.float64)
                                         .expand_as(target))
    grid = torch.stack([mass(s) for s in torch.linspace(-30, 30, 601, dtype=torch.float64)])
    step = (grid[1:] - grid[:-1]).min().item()
    check(f"sink calibration: the mass function is increasing in s on [-30, 30] (min step "
          f"{step:.1e})", 0 if step > 0 else 1, 0)
    check("sink calibration: mass(s) reproduces the target mass a", max_diff(mass(sinks), target), 1e-6)
    bracket = (mass(sinks - 1e-6) < target) & (target < mass(sinks + 1e-6))
    check("sink calibration: s is the root to 1e-6 (mass(s - 1e-6) < a < mass(s + 1e-6))",
          0 if bracket.all() else 1, 0)
    # for softmax, A[q, k] = e^z_qk / sum_j e^z_qj = sigmoid(z_qk - logsumexp_{j != k} z_qj)
    direct = []
    for z, key in zip(logits, keys):
        rest = ref._rest_logsumexp([z], key[None])[0]                   # [L,h,N]
        own = z.gather(-1, key[:, :, None, None].expand(-1, -1, z.shape[-2], 1))[..., 0]
        direct.append(torch.sigmoid(own - rest).mean(dim=-1))
    check("sink calibration: a = mean of A[q, k_i] = mean sigmoid(z_qk - logsumexp_{j != k} z_qj)",
          max_diff(torch.stack(direct).mean(dim=0), target), 1e-14)
    check("sink calibration: k_i are the sink keys of each image's own forward",
          0 if torch.equal(keys, torch.cat([ref.sink_keys(tr) for tr in traces])) else 1, 0)
    one_by_one = ref.calibrate_sink(cfg, w, [image for image in images])
    check("sink calibration: a batch and a list of the same images give the same sinks",
          max_diff(one_by_one[0], sinks), 0)


def check_intervention_fixtures():
    index = fixture_index("interventions.json")
    if index is None:
        return
    worst, wrong_names = 0.0, []
    for entry in index:
        cfg, w = ref.load_model(os.path.join(FIXTURES, entry["model"]))
        stored, _ = ref.read_safetensors(os.path.join(FIXTURES, entry["file"]))
        expected = fx.intervention_tensors(entry, cfg, w, stored["input"])
        if sorted(stored) != sorted(expected):
            wrong_names.append(entry["name"])
            continue
        for k, v in expected.items():  # relative to the magnitude: planted norms reach ~400
            v = torch.as_tensor(v, dtype=torch.float64)
            worst = max(worst, max_diff(stored[k] / v.abs().clamp(min=1), v / v.abs().clamp(min=1)))
    check(f"{len(index)} intervention fixtures hold the tensors make_fixtures names",
          len(wrong_names), 0)
    check(f"{len(index)} intervention fixtures match the reference (relative)", worst, 1e-6)


# --- h. vitreg study ---------------------------------------------------------------------------

def doc_summary_keys():
    """The `"summary"` keys docs/study.md lists (its last section), or None without the doc."""
    path = os.path.join(HERE, "..", "..", "docs", "study.md")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        section = f.read().split("## `study.csv` and `\"summary\"`", 1)[1]
    keys = []
    for span in re.findall(r"`([^`]*)`", section):
        keys += [k.strip() for k in span.split(",")
                 if re.fullmatch(r"[a-z0-9_]+", k.strip()) and k.strip() != "null"]
    return keys


def json_diff(a, b, where="", worst=0.0, wrong=None):
    """(largest relative difference of the numbers, paths where the structure, a string, an
    int or a null differs) between two JSON values."""
    wrong = [] if wrong is None else wrong
    if isinstance(a, dict) and isinstance(b, dict) and sorted(a) == sorted(b):
        for k in a:
            worst, _ = json_diff(a[k], b[k], f"{where}.{k}", worst, wrong)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            worst, _ = json_diff(x, y, f"{where}[{i}]", worst, wrong)
    elif isinstance(a, float) and isinstance(b, float):
        worst = max(worst, abs(a - b) / max(1.0, abs(b)))
    elif a != b or type(a) is not type(b):
        wrong.append(where)
    return worst, wrong


def check_study():
    keys = doc_summary_keys()
    if keys is None:
        print("skip study: docs/study.md not found")
    else:
        check("study: the summary keys are docs/study.md's list, in order",
              0 if tuple(keys) == study.SUMMARY_KEYS else 1, 0)
    expected_path = os.path.join(FIXTURES, "study", "expected.json")
    if not os.path.exists(expected_path):
        print("skip study: tests/fixtures/study/expected.json not generated")
        return
    stored, _ = ref.read_safetensors(os.path.join(FIXTURES, "study", "inputs.safetensors"))
    result, _ = fx.study_case(stored)  # asserts the margins again
    with open(expected_path) as f:
        expected = json.load(f)
    worst, wrong = json_diff(json.loads(json.dumps(result)), expected)
    check(f"study: expected.json has the reference's structure ({wrong[:3]})", len(wrong), 0)
    check("study: expected.json matches the reference (relative)", worst, 1e-9)
    worst_sum, worst_curve, bad = 0.0, 0.0, []
    for c in result["configs"]:
        sums = torch.tensor(c["weights_sum"], dtype=torch.float64)
        abstention = torch.tensor([[h["mean_abstention"] for h in row] for row in c["heads"]],
                                  dtype=torch.float64)
        worst_sum = max(worst_sum, max_diff(sums, 1 - abstention))
        if c["attention"] == "softmax":
            worst_sum = max(worst_sum, max_diff(sums, torch.ones_like(sums)))
            bad += [] if c["abstaining_query"] is None and c["retrofit"] is not None else [c["name"]]
        main = next(m for m in c["mass_vs_tokens"] if m["size"] == c["size"])
        worst_curve = max(worst_curve, max_diff(main["mass"], sums))
        if main["tokens"] != c["tokens"] or c["tokens"] != 1 + c["registers"] + fx.GRID ** 2:
            bad.append(c["name"])
        if list(c["summary"]) != list(study.SUMMARY_KEYS):
            bad.append(c["name"])
        added = (c["depth"] * len(c["heads"][0]) if c["attention"] == "sink" else 0) \
            + (c["registers"] - c["test_time_registers"]) * c["dim"]
        if c["cost"]["parameters_added"] != added:
            bad.append(c["name"])
    check("study: weights_sum = 1 - mean_abstention (1 for softmax)", worst_sum, 1e-12)
    check("study: the mass curve at the main size is weights_sum", worst_curve, 1e-12)
    check(f"study: tokens, summary keys, parameters_added, softmax-only parts ({bad})", len(bad), 0)
    check("study: calibration half 0, 2, evaluation half 1, 3",
          0 if (result["calibration_images"], result["evaluation_images"]) == ([0, 2], [1, 3]) else 1, 0)
    planted = {"name": "planted_f32", "path": os.path.join(FIXTURES, fx.PLANTED.path)}
    one = study.study([planted], {16: stored["size16"][:1]}, 16)
    c = one["configs"][0]
    check("study: one image: no split, no per-tensor int8, no calibrated sink",
          0 if (one["calibration_images"], one["evaluation_images"]) == ([], [0])
          and c["int8"]["per_tensor"] is None and c["retrofit"]["calibrated_sink"] is None
          and c["retrofit"]["calibrated_sink_evicted"] is None
          and c["summary"]["int8_per_tensor_cls_cosine"] is None else 1, 0)


def check_pca_reduce():
    """dense_reference.pca_reduce (SVD of the centred patches) against the covariance's eigenvectors
    (torch.linalg.eigh) written out here, and its reconstruction error against the variance it
    leaves out; both with fewer patches than channels and more."""
    import dense_reference as dense
    g = torch.Generator().manual_seed(44)
    for n, c, k in ((30, 50, 4), (200, 12, 5)):
        x = torch.randn(n, c, generator=g, dtype=torch.float64) @ torch.diag(torch.linspace(3, 0.1, c, dtype=torch.float64))
        fit = dense.pca_reduce(x, k)
        values, vectors = torch.linalg.eigh(torch.cov(x.T))            # ascending
        axes = vectors[:, -k:].flip(1).T
        signs = torch.sign(axes.gather(1, axes.abs().argmax(dim=1, keepdim=True)))
        check(f"pca_reduce {n}x{c}: components = the covariance's eigenvectors, signed", max_diff(fit["components"], axes * signs), 1e-10)
        check(f"pca_reduce {n}x{c}: explained variance = its eigenvalues", max_diff(fit["explained_variance"], values[-k:].flip(0)), 1e-10)
        back = fit["mean"] + fit["reduced"] @ fit["components"]
        discarded = values.sum() - values[-k:].sum()
        check(f"pca_reduce {n}x{c}: reconstruction error / (n - 1) = the variance left out",
              abs(float(((x - back) ** 2).sum()) / (n - 1) - float(discarded)), 1e-9)


def main():
    torch.set_num_threads(1)
    check_pca_reduce()
    check_design_attention_values()
    check_design_resampling()
    check_alternative_forward()
    check_layouts()
    check_families()
    check_siglip()
    check_timm_siglip()
    check_dinov3()
    check_dinov3_hub()
    check_eva()
    check_trace_invariants()
    check_rollout_by_hand()
    check_fixtures()
    check_upsample_fixture()
    check_dense_set()
    check_intervention_helpers_by_hand()
    check_interventions()
    check_sink_calibration()
    check_intervention_fixtures()
    check_study()
    if failures:
        print(f"{len(failures)} check(s) FAILED")
        return 1
    print("all reference checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
