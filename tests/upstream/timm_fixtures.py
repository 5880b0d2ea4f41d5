#!/usr/bin/env python3
"""Parity fixtures made by timm's own VisionTransformer and Eva (huggingface/pytorch-image-models,
timm/models/vision_transformer.py and timm/models/eva.py): architectures from vitreg's table
(src/core/checkpoint/timm_architectures.inc) built by `timm.create_model(NAME, pretrained=False,
...)` with only the width, depth, heads and image size overridden (SHAPE), so everything else is the
definition's own. Each is saved as a timm hub folder: model.safetensors (timm's state_dict names)
beside a config.json with `architecture`, `model_args` (only those overrides, as the hub repeats
what differs from the definition), `num_classes`, `num_features` and `pretrained_cfg` (the
definition's mean, std, crop_pct and interpolation; input_size the small native size). Recorded in
float64: forward_features (after the final norm, split at model.num_prefix_tokens into the class
token, registers and patches) and forward_head(x, pre_logits=True) (the pooled feature: the class
token, fc_norm(mean) or the MAP head), at the native size (a 3x3 grid) and at a non-square one (2x4) through a second
model built with dynamic_img_size=True and the same weights (timm's resample_abs_pos_embed at run
time; EVA's RoPE for that grid).

    /usr/bin/python3 tests/upstream/timm_fixtures.py TIMM_CHECKOUT COMMIT [OUT]

TIMM_CHECKOUT holds `timm/` at COMMIT, exported from its git history (tests/upstream/README.md);
OUT defaults to tests/fixtures/upstream/timm.

Under Debian's torch 1.13 timm imports as it is; nothing stands in for anything. timm's fused
attention (F.scaled_dot_product_attention, which torch 1.13 lacks) is switched off with
TIMM_FUSED_ATTN=0 before import, so every Attention runs its own written-out path (q k^T * scale,
softmax, @ v); the script checks use_fused_attn() is False. Nothing of timm's maths is touched.
Every head is num_classes=0 (stated as the hub states it, at the top of config.json), to keep the
folder small; forward_head(pre_logits=True) does not reach the classifier.
"""
import json
import os

import torch

from upstream_util import checkout_args, import_checkout, randomize, write_expected, write_index, write_weights

# timm name -> the overrides passed to create_model (and written as model_args). Each covers a
# distinct path of vitreg's timm reading:
SHAPE = {
    # class token + 4 registers, no_embed_class, LayerScale, bicubic pos-embed resampling
    "vit_small_patch14_reg4_dinov2": dict(img_size=42, embed_dim=32, depth=2, num_heads=2),
    # LayerScale, no_embed_class, class token
    "deit3_small_patch16_224": dict(img_size=48, embed_dim=32, depth=2, num_heads=2),
    # norm_pre, QuickGELU, no patch-embed bias, eps 1e-5
    "vit_base_patch16_clip_quickgelu_224": dict(img_size=48, embed_dim=32, depth=2, num_heads=2),
    # SigLIP: no class token, MAP head, gelu_tanh, mlp_ratio 3.7362 (hidden 119). (The patch-16 one:
    # vit_base_patch32_siglip_256's patch embedding alone would be 400 KB at width 32.)
    "vit_so400m_patch16_siglip_256": dict(img_size=48, embed_dim=32, depth=2, num_heads=2),
    # no class token, 1 register, no_embed_class, avg pool of the patches + fc_norm, LayerScale
    "vit_little_patch16_reg1_gap_256": dict(img_size=48, embed_dim=32, depth=2, num_heads=2),
    # EVA-02: RoPE (ref_feat_shape 16x16 over a 3x3 grid), SwiGLU, avg pool
    "eva02_small_patch14_224": dict(img_size=42, embed_dim=32, depth=2, num_heads=2),
}
NEAR_ONE = ("norm1.weight", "norm2.weight", "norm.weight", "norm_pre.weight", "gamma")


def import_timm(checkout):
    os.environ["TIMM_FUSED_ATTN"] = "0"
    timm = import_checkout(checkout, "timm")
    import timm.layers
    assert not timm.layers.use_fused_attn(), "timm's fused attention is on"
    print("TIMM_FUSED_ATTN=0: timm's written-out attention, no F.scaled_dot_product_attention")
    return timm


def outputs(model, pixels):
    """forward_features split at num_prefix_tokens, and the pooled feature, in float64."""
    with torch.no_grad():
        x = model.forward_features(pixels.double())
        pooled = model.forward_head(x, pre_logits=True)
    cls = 1 if getattr(model, "cls_token", None) is not None else 0
    prefix = model.num_prefix_tokens
    out = {"registers": x[:, cls:prefix], "patches": x[:, prefix:], "pooled": pooled}
    if cls:
        out["cls"] = x[:, 0]
    return out


def pretrained_cfg(model, img_size):
    cfg = model.pretrained_cfg
    return {"input_size": [3, img_size, img_size], "mean": list(cfg["mean"]), "std": list(cfg["std"]),
            "crop_pct": cfg["crop_pct"], "interpolation": cfg["interpolation"]}


def make_inputs(out, generator):
    """One float32 batch of 2 per patch size and size (a 3x3 grid; a 2x4 one), shared by the cases."""
    pixels = {}
    for patch in (14, 16):
        pixels[f"p{patch}.native"] = torch.randn(2, 3, 3 * patch, 3 * patch, generator=generator).float()
        pixels[f"p{patch}.wide"] = torch.randn(2, 3, 2 * patch, 4 * patch, generator=generator).float()
    os.makedirs(out, exist_ok=True)
    write_expected(os.path.join(out, "inputs.safetensors"), pixels)
    return pixels


def make_case(timm, name, out, generator, inputs):
    shape = SHAPE[name]
    model = timm.create_model(name, pretrained=False, num_classes=0, **shape).eval()
    randomize(model, generator, NEAR_ONE)
    norms = [n for n, m in model.named_modules() if isinstance(m, torch.nn.LayerNorm) and m.weight is not None]
    assert all((n + ".weight").endswith(NEAR_ONE) for n in norms), norms
    folder = os.path.join(out, name)
    write_weights(os.path.join(folder, "model.safetensors"), model.state_dict())
    config = {"architecture": name, "num_classes": 0, "num_features": model.num_features, "model_args": shape,
              "pretrained_cfg": pretrained_cfg(model, shape["img_size"])}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
        f.write("\n")
    dynamic = timm.create_model(name, pretrained=False, num_classes=0, dynamic_img_size=True, **shape).eval()
    dynamic.load_state_dict(model.state_dict())
    patch = model.patch_embed.patch_size[0]
    assert shape["img_size"] == 3 * patch
    expected, rows = {}, []
    for size, m in (("native", model), ("wide", dynamic)):
        key = f"p{patch}.{size}"
        pixels = inputs[key]
        h, w = pixels.shape[2:]
        got = outputs(m.double(), pixels)
        expected.update({f"{size}.{k}": v for k, v in got.items() if v.numel()})
        rows.append({"name": f"{name} {size}", "model": f"upstream/timm/{name}", "size": size,
                     "inputs": "upstream/timm/inputs.safetensors", "input": key, "expected": f"upstream/timm/{name}/expected.safetensors", "height": h, "width": w,
                     "class_token": "cls" in got, "global_pool": model.global_pool, "registers": got["registers"].shape[1]})
    write_expected(os.path.join(folder, "expected.safetensors"), expected)
    return rows


def main():
    checkout, commit, out = checkout_args(__doc__, "timm")
    timm = import_timm(checkout)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(53)
    inputs = make_inputs(out, generator)
    rows = []
    for name in SHAPE:
        rows += make_case(timm, name, out, generator, inputs)
    write_index(out, "huggingface/pytorch-image-models", commit, rows, timm=timm.__version__)


if __name__ == "__main__":
    main()
