#!/usr/bin/env python3
"""The artifact criterion of issue #20, in PyTorch, for a recipe model on canvases with masks.

An image *has an artifact* when one of its background patches (Fashion-MNIST items cover at
most half of it) both
  * has a last-block output norm (pre-norm residual stream) >= RATIO x the image's median
    patch norm, and
  * is the top-attended key of at least one head in the last half of the layers, with
    alpha >= ALPHA, where alpha_k = mean over queries of A[q, k] (the mean received attention
    of evaluate.py; keys include CLS and registers, so a register that wins hides the patch).
Reported beside it: the same rate for any patch (background or not), the rates of each half
alone (a background patch that is such a top key; one with such a norm), kurtosis mu4/sigma^4 of
the last block's output (all tokens and channels, per image, mean over images), its largest
|x|, and the mean max/median patch-norm ratio.

    python3 weights/recipe/artifacts.py CHECKPOINT... [--images 128]

The canvases come from the test split's items 5000-9999 (those of the held-out set), drawn
with the data settings recorded in each checkpoint's metadata.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

RATIO, ALPHA, FG = 3.0, 0.2, 0.5


def decide(norms, key_mass, kurtosis, max_abs, prefix, cover, ratio=RATIO, alpha_min=ALPHA,
           fg=FG):
    """The criterion from what a forward recorded.

    norms [B, T] last block's output norm per token; key_mass [L/2, B, H, T] mean received
    attention per key in the last half of the layers; kurtosis [B]; max_abs the largest |x|;
    prefix the tokens before the patches; cover [B, patches]."""
    norms, key_mass = np.asarray(norms, np.float64), np.asarray(key_mass, np.float64)
    patches = norms[:, prefix:]
    med = np.median(patches, axis=1)
    high = patches >= ratio * med[:, None]
    background = np.asarray(cover) <= fg
    key = key_mass.argmax(axis=-1)                                # [L/2, B, H]
    val = key_mass.max(axis=-1)
    sink = np.zeros_like(high)
    b_idx = np.arange(key.shape[1])[None, :, None]
    on_background = background[b_idx, np.clip(key - prefix, 0, None)]
    kinds = np.where(key < prefix, 0, np.where(on_background, 1, 2))
    for l, b, h in zip(*np.nonzero((key >= prefix) & (val >= alpha_min))):
        sink[b, key[l, b, h] - prefix] = True
    art = (high & sink & background).any(axis=1)
    any_patch = (high & sink).any(axis=1)
    return {
        "images": int(norms.shape[0]),
        "artifact_rate": float(art.mean()),
        "any_patch_rate": float(any_patch.mean()),
        # the criterion's two halves apart: which one a model lacks
        "background_sink_rate": float((sink & background).any(axis=1).mean()),
        "background_high_norm_rate": float((high & background).any(axis=1).mean()),
        "norm_ratio": float((patches.max(axis=1) / med).mean()),
        "kurtosis": float(np.mean(kurtosis)),
        "max_abs": float(max_abs),
        "top_key_share": {k: float((kinds == i).mean())
                          for i, k in enumerate(["prefix", "background", "foreground"])},
    }


def criterion(model, x, cover):
    """The criterion for a recipe model (PyTorch); x normalized [B,3,H,W], cover [B, patches]."""
    records = []
    with torch.no_grad():
        model.features(x, records)
    out = records[-1]["x"]
    key_mass = torch.stack([r["attn"].mean(dim=2) for r in records[len(records) // 2:]])
    return decide(out.norm(dim=-1).numpy(), key_mass.numpy(), common.kurtosis(out.numpy()),
                  float(out.abs().max()), model.prefix, cover)


def criterion_vitreg(path, x, cover):
    """The same criterion measured by vitreg's own forward (vitreg.Model.trace)."""
    import vitreg
    m = vitreg.Model(path)
    depth = m.config["depth"]
    t = m.trace(np.ascontiguousarray(x.numpy()), norms=True, key_mass=True, queries=[])
    prefix = t["tokens"] - t["grid"][0] * t["grid"][1]
    return decide(t["norms"][-1], t["key_mass"][depth // 2:], t["kurtosis"][-1],
                  float(t["max_abs"][-1].max()), prefix, cover)


def heldout_canvases(settings, n, seed=7):
    """n canvases with coverage from the held-out items, drawn with CanvasSynth `settings`."""
    te_x, te_y = common.load_fmnist("t10k")
    synth = common.CanvasSynth(te_x[5000:], te_y[5000:], common.load_textures(), **settings)
    return synth.batch(np.random.default_rng([seed, 3]), n, cover=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--vitreg", action="store_true",
                    help="measure with vitreg's forward (import vitreg; PYTHONPATH=build/python)")
    args = ap.parse_args(argv)
    drawn = {}  # checkpoints trained on the same data share their canvases
    for path in args.checkpoints:
        if args.vitreg:
            meta = common.read_safetensors(path)[1]
        else:
            model, meta = common.load_model(path)
        settings = common.data_settings(meta)
        key = json.dumps(settings, sort_keys=True)
        if key not in drawn:
            u8, _, cover = heldout_canvases(settings, args.images)
            drawn[key] = (common.to_input(u8), cover)
        x, cover = drawn[key]
        r = criterion_vitreg(path, x, cover) if args.vitreg else criterion(model, x, cover)
        print(json.dumps({"checkpoint": os.path.basename(path), **r}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
