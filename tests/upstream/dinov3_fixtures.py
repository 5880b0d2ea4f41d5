#!/usr/bin/env python3
"""Parity fixtures made by DINOv3's own DinoVisionTransformer (facebookresearch/dinov3,
dinov3/models/vision_transformer.py), built by dinov3/hub/backbones.py's own builders
(dinov3_vits16, dinov3_vits16plus, dinov3_vit7b16 with pretrained=False: their init_weights, so
the masked k bias's bias_mask and rope_embed.periods are as the hub's) at a small width. Saved as
the hub's .pth state dict (storage_tokens, blocks.i.attn.qkv.bias_mask, rope_embed.periods,
blocks.i.mlp.w1/w2/w3, local_cls_norm, ...), with forward_features' x_norm_clstoken,
x_storage_tokens and x_norm_patchtokens in float64 at a square size and a non-square one (RoPE
rotates by any grid).

    /usr/bin/python3 tests/upstream/dinov3_fixtures.py DINOV3_CHECKOUT COMMIT [OUT]

DINOV3_CHECKOUT holds `dinov3/` at COMMIT, exported from its git history (tests/upstream/README.md);
OUT defaults to tests/fixtures/upstream/dinov3. Only the width, depth and heads are the script's
(SHAPE): DinoVisionTransformer is wrapped while a builder runs, everything else is the builder's.

Debian's torch 1.13 lacks three torch 2 APIs the code touches; each stand-in is used only where
missing, and none changes DINOv3's maths:
- F.scaled_dot_product_attention: exact_sdpa (softmax(q k^T / sqrt(d)) v, written out);
- torch._dynamo.config: a namespace that block.py sets two compile-cache knobs on at import;
- torch.compiler.allow_in_graph: the identity, a decorator on fp8_linear.py's FP8 function,
  which these models never run.
"""
import os
import types

import torch

from upstream_util import checkout_args, import_checkout, forward_features, make_dino_fixtures, stand_in, stand_in_sdpa

# hub builder -> the shape it is built at. The 7B's width 80 (2 heads of 40) makes swiglu64's
# alignment bite: int(3 * 80 * 2 / 3) = 160 rounds up to 192.
SHAPE = {
    "dinov3_vits16": dict(embed_dim=32, depth=2, num_heads=2),
    "dinov3_vits16plus": dict(embed_dim=32, depth=2, num_heads=2),
    "dinov3_vit7b16": dict(embed_dim=80, depth=2, num_heads=2),
}
SIZES = {"square": (48, 48), "wide": (32, 80)}  # 3x3 and 2x5 patches of 16


def import_dinov3(checkout):
    stand_in_sdpa()
    stand_in(torch, "_dynamo", types.SimpleNamespace(config=types.SimpleNamespace()), "torch._dynamo.config",
             "a namespace for block.py's settings")
    stand_in(torch, "compiler", types.SimpleNamespace(allow_in_graph=lambda f: f), "torch.compiler.allow_in_graph",
             "the identity")
    import_checkout(checkout, "dinov3")
    import dinov3.hub.backbones as backbones
    import dinov3.models.vision_transformer as vits
    return backbones, vits


def main():
    checkout, commit, out = checkout_args(__doc__, "dinov3")
    backbones, vits = import_dinov3(checkout)
    make_dino_fixtures(out, "dinov3", "facebookresearch/dinov3", commit, backbones, vits, SIZES,
                       {name: (shape, {}) for name, shape in SHAPE.items()}, forward_features("x_storage_tokens"))


if __name__ == "__main__":
    main()
