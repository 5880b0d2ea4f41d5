#!/usr/bin/env python3
"""Parity fixtures made by DINOv2's own DinoVisionTransformer (facebookresearch/dinov2,
dinov2/models/vision_transformer.py) configured as dinov2/hub/backbones.py's _make_dinov2_model
does: patch 14, LayerScale init_values 1.0, block_chunks 0, interpolate_offset 0.1, and per hub
name its FFN, registers and interpolate_antialias. Saved as the torch hub's .pth (the state dict
torch.save writes, as dinov2_vits14_pretrain.pth is), with forward_features' x_norm_clstoken,
x_norm_regtokens and x_norm_patchtokens in float64 at the native size and at a non-square one
(the model's own interpolate_pos_encoding).

    /usr/bin/python3 tests/upstream/dinov2_fixtures.py DINOV2_CHECKOUT COMMIT [OUT]

DINOV2_CHECKOUT holds `dinov2/` at COMMIT, exported from its git history (tests/upstream/README.md);
OUT defaults to tests/fixtures/upstream/dinov2. xFormers is switched off (XFORMERS_DISABLED), so
MemEffAttention and SwiGLUFFNFused run their plain PyTorch fallbacks (Attention.forward, SwiGLUFFN);
the script checks and prints that. Under Debian's torch 1.13, which lacks
F.scaled_dot_product_attention, exact_sdpa stands in; DINOv2's own maths is unchanged.

Smaller than the hub's: width 64 in 1 head (a hub .pth states no heads; vitreg takes the hub's
head width 64), depth 2, mlp_ratio 2, img_size 56 (a 4x4 grid: the hub's 518 would make 6 MB inputs).
"""
import os

import torch

from upstream_util import checkout_args, dino_case, dino_inputs, import_checkout, randomize, stand_in_sdpa, write_index

# what each hub builder passes beyond _make_dinov2_model's defaults
CASES = {
    "dinov2_vits14": {},
    "dinov2_vits14_reg4": {"num_register_tokens": 4, "interpolate_antialias": True},
    "dinov2_vitg14": {"ffn_layer": "swiglufused"},  # vit_giant2's FFN
}
HUB = dict(patch_size=14, init_values=1.0, ffn_layer="mlp", block_chunks=0, num_register_tokens=0,
           interpolate_antialias=False, interpolate_offset=0.1)
SHAPE = dict(img_size=56, embed_dim=64, depth=2, num_heads=1, mlp_ratio=2)
SIZES = {"native": (56, 56), "wide": (42, 84)}  # a 3x6 grid: rows shrink (antialiased or not), columns grow


def import_dinov2(checkout):
    os.environ["XFORMERS_DISABLED"] = "1"  # the plain PyTorch path even where xFormers is installed
    stand_in_sdpa()
    import_checkout(checkout, "dinov2")
    import dinov2.layers.attention as attention
    import dinov2.layers.block as block
    import dinov2.layers.swiglu_ffn as swiglu_ffn
    import dinov2.models.vision_transformer as vits
    assert not (attention.XFORMERS_AVAILABLE or block.XFORMERS_AVAILABLE or swiglu_ffn.XFORMERS_AVAILABLE)
    assert swiglu_ffn.SwiGLU is swiglu_ffn.SwiGLUFFN
    print("xFormers off: MemEffAttention runs Attention.forward, SwiGLUFFNFused runs SwiGLUFFN")
    return vits


def build(vits, settings):
    """DinoVisionTransformer as vits.vit_small / vit_giant2 make it (MemEffAttention blocks)."""
    from functools import partial
    return vits.DinoVisionTransformer(**SHAPE, **{**HUB, **settings},
                                      block_fn=partial(vits.Block, attn_class=vits.MemEffAttention)).eval()


def main():
    checkout, commit, out = checkout_args(__doc__, "dinov2")
    vits = import_dinov2(checkout)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(53)
    pixels = dino_inputs(out, SIZES, generator)
    rows = []
    for name, settings in CASES.items():
        model = build(vits, settings)
        randomize(model, generator, ("norm1.weight", "norm2.weight", "norm.weight", "gamma"))
        rows += dino_case(out, "dinov2", name, model, "x_norm_regtokens", pixels)
    write_index(out, "facebookresearch/dinov2", commit, rows, settings={n: {**HUB, **s, **SHAPE} for n, s in CASES.items()})


if __name__ == "__main__":
    main()
