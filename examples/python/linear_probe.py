#!/usr/bin/env python3
"""How well do a model's patch features segment? A linear per-patch classifier, fitted with numpy
on vitreg's dense features, scored by mIoU on held-out images.

    PYTHONPATH=build/python python3 examples/python/linear_probe.py [DATA] [MODEL] [LAYERS]

DATA holds img_*.png and their label masks mask_*.png (8-bit class per pixel; default: the 40
shapes of tests/fixtures/dense). The first 75% of the sorted images fit, the rest score. The
classifier is `vitreg linprobe`'s: standardized, final-normed features of LAYERS (default "last"), one-hot
targets, classes weighted alike, ridge 1.0; each patch takes the most common label under it."""
import json
import os
import sys

import numpy as np

import vitreg

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def patch_labels(mask, patch):
    """The most common label in each patch of an [H, W] mask -> [h * w]."""
    h, w = mask.shape[0] // patch, mask.shape[1] // patch
    cells = mask[: h * patch, : w * patch].reshape(h, patch, w, patch).transpose(0, 2, 1, 3).reshape(h * w, -1)
    return np.array([np.bincount(c, minlength=256).argmax() for c in cells])


def features_and_labels(model, data, names, layers):
    patch, registers = model.config["patch"], model.config["registers"]
    xs, ys = [], []
    for name in names:
        x = model.preprocess(os.path.join(data, name), resize="none")  # keep the pixels: whole patches
        blocks = model.trace(x[None], blocks=layers, blocks_normed=True)["blocks"][:, 0, 1 + registers:]  # [layers, patches, D]
        xs.append(blocks.transpose(1, 0, 2).reshape(blocks.shape[1], -1))  # layers side by side
        mask = vitreg.read_image(os.path.join(data, name.replace("img_", "mask_")))[..., 0]
        ys.append(patch_labels(mask, patch))
    return np.concatenate(xs).astype(np.float64), np.concatenate(ys)


def fit_and_score(xtr, ytr, xte, yte, classes, ridge=1.0):
    mean, sd = xtr.mean(0), xtr.std(0) + 1e-6
    design = lambda x: np.hstack([(x - mean) / sd, np.ones((len(x), 1))])  # noqa: E731
    a, b = design(xtr), design(xte)
    y = np.eye(classes)[ytr]
    count = np.bincount(ytr, minlength=classes).astype(np.float64)
    weight = np.sqrt(len(a) / ((count > 0).sum() * count[ytr]))[:, None]  # classes weigh alike
    a, y = a * weight, y * weight
    gram = a.T @ a
    dim = xtr.shape[1]
    gram[np.arange(dim), np.arange(dim)] += ridge * len(a) / dim
    pred = (b @ np.linalg.solve(gram, a.T @ y)).argmax(1)
    iou = []
    for k in range(classes):
        inter, union = np.sum((pred == k) & (yte == k)), np.sum((pred == k) | (yte == k))
        iou.append(inter / union if union else np.nan)
    return np.array(iou), float(np.mean(pred == yte))


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures", "dense")
    model = vitreg.Model(sys.argv[2] if len(sys.argv) > 2 else "vitreg-untrained-s14-d192-reg4")
    layers = sys.argv[3] if len(sys.argv) > 3 else "last"
    with open(os.path.join(data, "classes.json")) as f:
        classes = json.load(f)["classes"]
    names = sorted(n for n in os.listdir(data) if n.startswith("img_") and n.endswith(".png"))
    split = int(len(names) * 0.75)
    xtr, ytr = features_and_labels(model, data, names[:split], layers)
    xte, yte = features_and_labels(model, data, names[split:], layers)
    iou, accuracy = fit_and_score(xtr, ytr, xte, yte, len(classes))
    print(f"{model.config['path']}: {split} images fit, {len(names) - split} score")
    for name, value in zip(classes, iou):
        print(f"  IoU {name:<12} {value:.3f}")
    print(f"mIoU {np.nanmean(iou):.4f}, pixel-patch accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()
