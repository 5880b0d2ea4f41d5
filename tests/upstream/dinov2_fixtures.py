#!/usr/bin/env python3
"""Parity fixtures made by DINOv2's own DinoVisionTransformer (facebookresearch/dinov2,
dinov2/models/vision_transformer.py), built by dinov2/hub/backbones.py's own builders (their
FFN, registers, LayerScale and interpolate_antialias / interpolate_offset: the register models
resample by size, antialiased; the others by scale factor with the 0.1 offset). Saved as the torch hub's .pth (the state dict
torch.save writes, as dinov2_vits14_pretrain.pth is), with forward_features' x_norm_clstoken,
x_norm_regtokens and x_norm_patchtokens in float64 at the native size and at a non-square one
(the model's own interpolate_pos_encoding).

    /usr/bin/python3 tests/upstream/dinov2_fixtures.py DINOV2_CHECKOUT COMMIT [OUT]

DINOV2_CHECKOUT holds `dinov2/` at COMMIT, exported from its git history (tests/upstream/README.md);
OUT defaults to tests/fixtures/upstream/dinov2. xFormers is switched off (XFORMERS_DISABLED), so
MemEffAttention and SwiGLUFFNFused run their plain PyTorch fallbacks (Attention.forward, SwiGLUFFN);
the script checks and prints that. Under Debian's torch 1.13, which lacks
F.scaled_dot_product_attention, exact_sdpa stands in; DINOv2's own maths is unchanged.

Smaller than the hub's (SHAPE; DinoVisionTransformer is wrapped while a builder runs, the rest is
the builder's): width 64 in 1 head (a hub .pth states no heads; vitreg takes the hub's head width
64), depth 2, mlp_ratio 2, img_size 56 (a 4x4 grid: the hub's 518 would make 6 MB inputs).
"""
import os


from upstream_util import checkout_args, import_checkout, forward_features, make_dino_fixtures, stand_in_sdpa

BUILDERS = ("dinov2_vits14", "dinov2_vits14_reg", "dinov2_vitg14")  # vit_giant2: SwiGLU (fused, without xFormers plain)
SHAPE = dict(embed_dim=64, depth=2, num_heads=1, mlp_ratio=2)
SIZES = {"native": (56, 56), "wide": (42, 84)}  # a 3x6 grid: rows shrink (antialiased or not), columns grow


def import_dinov2(checkout):
    os.environ["XFORMERS_DISABLED"] = "1"  # the plain PyTorch path even where xFormers is installed
    stand_in_sdpa()
    import_checkout(checkout, "dinov2")
    import dinov2.layers.attention as attention
    import dinov2.layers.block as block
    import dinov2.layers.swiglu_ffn as swiglu_ffn
    import dinov2.hub.backbones as backbones
    import dinov2.models.vision_transformer as vits
    assert not (attention.XFORMERS_AVAILABLE or block.XFORMERS_AVAILABLE or swiglu_ffn.XFORMERS_AVAILABLE)
    assert swiglu_ffn.SwiGLU is swiglu_ffn.SwiGLUFFN
    print("xFormers off: MemEffAttention runs Attention.forward, SwiGLUFFNFused runs SwiGLUFFN")
    return backbones, vits


def main():
    checkout, commit, out = checkout_args(__doc__, "dinov2")
    backbones, vits = import_dinov2(checkout)
    make_dino_fixtures(out, "dinov2", "facebookresearch/dinov2", commit, backbones, vits, SIZES,
                       {name: (SHAPE, {"img_size": 56}) for name in BUILDERS}, forward_features("x_norm_regtokens"))


if __name__ == "__main__":
    main()
