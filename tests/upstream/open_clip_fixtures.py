#!/usr/bin/env python3
"""Parity fixtures made by open_clip's own code: small random vision towers built by open_clip's
VisionTransformer, saved in open_clip's layout (`visual.*` in open_clip_model.safetensors beside an
open_clip_config.json) with what its forward computes in float64 (stored as float32).

    python3 tests/upstream/open_clip_fixtures.py OPEN_CLIP_SRC COMMIT [OUT]

OPEN_CLIP_SRC is a checkout of open_clip's `src/` (its git tree at COMMIT, exported: see
tests/upstream/README.md); OUT defaults to tests/fixtures/upstream/open_clip. Only the tower's
own modules are imported (transformer.py and what it imports), so neither timm nor the tokenizers
are needed. Under Debian's torch 1.13, which lacks F.scaled_dot_product_attention, exact_sdpa
stands in for it; open_clip's own maths is unchanged.
"""
import json
import os
import sys
import types

import torch

from upstream_util import checkout_args, randomize, stand_in_sdpa, write_expected, write_index, write_weights

# Each case: open_clip_config.json's vision_cfg beyond the shared shape, and model_cfg's quick_gelu.
SHAPE = {"image_size": 32, "patch_size": 8, "width": 32, "layers": 2, "head_width": 8, "mlp_ratio": 4.0}
EMBED = 16
CASES = {
    "tok_quickgelu_ls": ({"ls_init_value": 0.1}, True),
    "avg": ({"pool_type": "avg"}, False),
    # CLIPA's towers (ViT-L-14-CLIPA.json): the mean of the raw patches, normed after the pool.
    "avg_final_ln_no_ln_pre": ({"pool_type": "avg", "final_ln_after_pool": True, "no_ln_pre": True}, False),
    "tok_final_ln": ({"final_ln_after_pool": True}, False),
    "gelu_tanh_eps": ({"act_kwargs": {"approximate": "tanh"}, "norm_kwargs": {"eps": 1e-6}}, False),
}


def import_tower(src):
    """open_clip.transformer without open_clip/__init__.py (which imports every model family)."""
    package = types.ModuleType("open_clip")
    package.__path__ = [os.path.join(src, "open_clip")]
    sys.modules["open_clip"] = package
    stand_in_sdpa()
    import open_clip.transformer as transformer  # noqa: E402
    return transformer


def build(transformer, vision, quick_gelu):
    """The tower as open_clip's _build_vision_tower builds it for this vision_cfg."""
    from functools import partial
    act = transformer.QuickGELU if quick_gelu else torch.nn.GELU
    if vision.get("act_kwargs"):
        act = partial(act, **vision["act_kwargs"])
    norm = transformer.LayerNorm
    if vision.get("norm_kwargs"):
        norm = partial(norm, **vision["norm_kwargs"])
    cfg = {**SHAPE, **vision}
    return transformer.VisionTransformer(
        image_size=cfg["image_size"], patch_size=cfg["patch_size"], width=cfg["width"], layers=cfg["layers"],
        heads=cfg["width"] // cfg["head_width"], mlp_ratio=cfg["mlp_ratio"], ls_init_value=cfg.get("ls_init_value"),
        output_dim=EMBED, no_ln_pre=cfg.get("no_ln_pre", False), pool_type=cfg.get("pool_type", "tok"),
        final_ln_after_pool=cfg.get("final_ln_after_pool", False), act_layer=act, norm_layer=norm,
        output_tokens=True)


def upstream_keys(src):
    """The keys open_clip's configs may hold, read from model.py's source (importing it needs the
    whole package): CLIPVisionCfg's fields and CLIP.__init__'s arguments."""
    import ast
    with open(os.path.join(src, "open_clip", "model.py")) as f:
        tree = ast.parse(f.read())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    vision = [n.target.id for n in classes["CLIPVisionCfg"].body if isinstance(n, ast.AnnAssign)]
    init = next(n for n in classes["CLIP"].body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    model = [a.arg for a in init.args.args[1:]]
    return {"model_cfg": sorted(model), "model_cfg.vision_cfg": sorted(vision)}


def make_case(transformer, name, vision, quick_gelu, out, generator):
    model = build(transformer, vision, quick_gelu).eval()
    randomize(model, generator, ("ln_pre.weight", "ln_post.weight", "ln_1.weight", "ln_2.weight", "gamma"))
    folder = os.path.join(out, name)
    write_weights(os.path.join(folder, "open_clip_model.safetensors"), model.state_dict(), "visual.")
    config = {"model_cfg": {"embed_dim": EMBED, "quick_gelu": quick_gelu, "vision_cfg": {**SHAPE, **vision}}}
    with open(os.path.join(folder, "open_clip_config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
    # float32 pixels, run in float64 by open_clip's own forward and pool.
    pixels = torch.randn(2, 3, SHAPE["image_size"], SHAPE["image_size"], generator=generator).float()
    model = model.double()
    with torch.no_grad():
        x = model.transformer(model._embeds(pixels.double()))
        pooled, tokens = model._pool(x)
        embedding, tokens_again = model(pixels.double())
    assert torch.equal(tokens, tokens_again)
    write_expected(os.path.join(folder, "expected.safetensors"),
                   {"input": pixels, "pooled": pooled, "embedding": embedding, "patches": tokens})
    return {"name": name, "model": f"upstream/open_clip/{name}", "expected": f"upstream/open_clip/{name}/expected.safetensors",
            "height": SHAPE["image_size"], "width": SHAPE["image_size"],
            # which vitreg output holds open_clip's pooled feature before the projection
            "pooled_is": {"tok": "cls", "avg": "pooled"}[vision.get("pool_type", "tok")]
            if not vision.get("final_ln_after_pool") or vision.get("pool_type") == "avg" else ""}


def main():
    src, commit, out = checkout_args(__doc__, "open_clip")
    transformer = import_tower(src)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(53)
    rows = [make_case(transformer, name, vision, quick, out, generator) for name, (vision, quick) in CASES.items()]
    write_index(out, "mlfoundations/open_clip", commit, rows, keys=upstream_keys(src))


if __name__ == "__main__":
    main()
