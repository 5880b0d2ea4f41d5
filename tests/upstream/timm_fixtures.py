#!/usr/bin/env python3
"""Parity fixtures made by timm's own VisionTransformer and Eva (huggingface/pytorch-image-models,
timm/models/vision_transformer.py and timm/models/eva.py): architectures from vitreg's table
(src/core/checkpoint/timm_architectures.inc) built by `timm.create_model(NAME, pretrained=False,
...)` with only the width, depth, heads, patch and image size overridden (SHAPE), so everything else is the
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

# One architecture per recipe of vitreg's table: a row's arguments less the ones that only set a
# size (embed_dim, depth, num_heads, patch_size, mlp_ratio; tests/test_upstream_timm.cpp holds the
# same list and fails naming any runnable architecture whose recipe none of these shares). Each is
# built at SHAPE, the only overrides (written as model_args), so everything else is the definition's.
RECIPES = [  # what each adds to deit_base_patch16_224 (ViT) or eva02_small_patch14_224 (Eva)
    "beit3_base_patch16_224",               # attn.norm and mlp.norm in the blocks, avg pool, eps 1e-5
    "deit3_small_patch16_224",              # LayerScale, no_embed_class
    "deit_base_patch16_224",                # the plain ViT: class token, eps 1e-6, GELU, token pool
    "eva02_base_patch14_224",               # q/k/v projections, SwiGLU's fc1_g/fc1_x with mlp.norm
    "eva02_base_patch16_clip_224",          # as eva02 B, attn.norm, token pool
    "eva02_small_patch14_224",              # RoPE (ref_feat_shape 16x16), packed SwiGLU, avg pool + fc_norm
    "eva_giant_patch14_224",                # EVA-01: learned positions only, GELU MLP
    "eva_giant_patch14_clip_224",           # EVA-01, token pool
    "eva_large_patch14_196",                # a VisionTransformer: class token, avg pool + fc_norm
    "flexivit_base",                        # class token, no_embed_class
    "vit_base_patch14_dinov2",              # LayerScale
    "vit_base_patch14_reg1_tipsv2",         # 1 register, no_embed_class, LayerScale
    "vit_small_patch14_reg4_dinov2",        # 4 registers, no_embed_class, LayerScale
    "vit_base_patch16_224_miil",            # no qkv bias
    "vit_base_patch16_clip_224",            # norm_pre, eps 1e-5
    "vit_base_patch16_clip_quickgelu_224",  # norm_pre, eps 1e-5, QuickGELU
    "vit_base_patch16_gap_224",             # no class token, avg pool without fc_norm
    "vit_base_patch16_reg4_gap_256",        # no class token, 4 registers, avg pool + fc_norm
    "vit_base_patch16_siglip_224",          # no class token, MAP head
    "vit_so400m_patch16_siglip_256",        # no class token, MAP head, gelu_tanh
    "vit_base_patch32_siglip_gap_256",      # no class token, avg pool without fc_norm, gelu_tanh
    "vit_betwixt_patch16_gap_256",          # no class token, avg pool, no qkv bias, LayerScale
    "vit_little_patch16_reg1_gap_256",      # no class token, 1 register, avg pool + fc_norm, LayerScale
    "vit_betwixt_patch16_reg4_gap_256",     # no class token, 4 registers, avg pool + fc_norm, LayerScale
]
# Tiny and the same for every recipe: a 3x3 grid of 4-pixel patches, width 16 over 2 heads, 2 blocks.
SHAPE = dict(img_size=12, patch_size=4, embed_dim=16, depth=2, num_heads=2)
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
    """One float32 batch of 2 per size (a 3x3 grid; a 2x4 one), shared by the cases."""
    patch = SHAPE["patch_size"]
    pixels = {f"p{patch}.native": torch.randn(2, 3, 3 * patch, 3 * patch, generator=generator).float(),
              f"p{patch}.wide": torch.randn(2, 3, 2 * patch, 4 * patch, generator=generator).float()}
    os.makedirs(out, exist_ok=True)
    write_expected(os.path.join(out, "inputs.safetensors"), pixels)
    return pixels


def make_case(timm, name, out, generator, inputs):
    shape = SHAPE
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
        rows.append({"name": f"{name} {size}", "architecture": name, "model": f"upstream/timm/{name}", "size": size,
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
    for name in RECIPES:
        rows += make_case(timm, name, out, generator, inputs)
    write_index(out, "huggingface/pytorch-image-models", commit, rows, timm=timm.__version__)


if __name__ == "__main__":
    main()
