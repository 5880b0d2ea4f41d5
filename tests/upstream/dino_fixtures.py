#!/usr/bin/env python3
"""Parity fixtures made by DINO's own VisionTransformer (facebookresearch/dino, vision_transformer.py),
built by its hubconf.py's own builders (dino_vits16, dino_vits8: vit_small's qkv bias, LayerNorm
eps 1e-6, no classifier). Saved as the torch hub's .pth (the bare state dict the builders load with
strict=True, as dino_deitsmall16_pretrain.pth holds it), with forward's output (the final-normed
class token) and get_intermediate_layers(x, 1)'s patches in float64 at the native size and at a
non-square one (the model's own interpolate_pos_encoding: bicubic by scale factor, the grid + 0.1).

    /usr/bin/python3 tests/upstream/dino_fixtures.py DINO_CHECKOUT COMMIT [OUT]

DINO_CHECKOUT holds hubconf.py, vision_transformer.py and utils.py at COMMIT, exported from its git
history (tests/upstream/README.md); OUT defaults to tests/fixtures/upstream/dino. DINO's code runs
under Debian's torch 1.13 as it is.

Smaller than the hub's (SHAPE; VisionTransformer is wrapped while a builder runs, the rest is the
builder's): width 64 in 1 head (a hub .pth states no heads; vitreg takes the hub's head width 64),
depth 2, mlp_ratio 1, img_size 48 (3x3 patches of 16, 6x6 of 8), to keep the files small.
"""
import torch

from upstream_util import checkout_args, import_checkout, make_dino_fixtures

BUILDERS = ("dino_vits16", "dino_vits8")
SHAPE = dict(embed_dim=64, depth=2, num_heads=1, mlp_ratio=1, img_size=[48])
SIZES = {"native": (48, 48), "wide": (32, 64)}  # 2x4 and 4x8 grids: rows shrink, columns grow


def dino_outputs(model, pixels):
    """forward's class token and get_intermediate_layers' last block, both after the final norm;
    DINO has no registers."""
    with torch.no_grad():
        cls = model(pixels.double())
        tokens = model.get_intermediate_layers(pixels.double(), 1)[0]
    assert torch.equal(cls, tokens[:, 0])
    return {"cls": cls, "registers": tokens[:, 1:1], "patches": tokens[:, 1:]}


def main():
    checkout, commit, out = checkout_args(__doc__, "dino")
    hubconf = import_checkout(checkout, "hubconf")
    make_dino_fixtures(out, "dino", "facebookresearch/dino", commit, hubconf, hubconf.vits, SIZES,
                       {name: (SHAPE, {}) for name in BUILDERS}, dino_outputs, "VisionTransformer")


if __name__ == "__main__":
    main()
