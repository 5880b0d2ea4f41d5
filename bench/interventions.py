#!/usr/bin/env python3
"""How far each intervention moves a trained softmax checkpoint, on the trained family's held-out
images: the retrofit (vitreg's own expectation) and eviction (window safety, docs/design.md,
"References" [Xiao2024]) rows of docs/design.md, "The study's property table"; the
interventions themselves as docs/design.md, "Interventions and the study" defines them.

Sink logits are calibrated (`vitreg calibrate-sink`) on the even-numbered held-out images and
every configuration is measured on the odd-numbered ones, so calibration and evaluation never
share an image. Images run at their own 112x112, the family's native size. Prints, per checkpoint and configuration, the CLS cosine to the original
(mean and min over images) and the mean patch-token cosine.

usage: PYTHONPATH=build/python /usr/bin/python3 bench/interventions.py [VITREG_BINARY]
"""
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

import vitreg

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BINARY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "apps", "vitreg")
HELDOUT = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "heldout", "heldout_*.png")))
CHECKPOINTS = ("vitreg-fmnist-softmax", "vitreg-fmnist-softmax-reg4")


def cosines(a, b):
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def features(model, images):
    out = [model.forward(model.preprocess(path, resize="none")[None]) for path in images]
    return np.concatenate([o["cls"] for o in out]), np.concatenate([o["patch"] for o in out])


def main():
    calibration, evaluation = HELDOUT[0::2], HELDOUT[1::2]
    print(f"calibration: {len(calibration)} held-out images, evaluation: {len(evaluation)} others")
    print(f"{'checkpoint':28s} {'configuration':34s} {'CLS cos mean':>12s} {'CLS cos min':>12s} {'patch cos':>10s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in CHECKPOINTS:
            calibrated = {}
            for evict in (False, True):
                out = os.path.join(tmp, f"{name}{'-evicted' if evict else ''}.safetensors")
                subprocess.run([BINARY, "calibrate-sink", name, "--images", *calibration, "-o", out, "--resize", "none",
                                *(["--evict-sink"] if evict else [])], check=True, capture_output=True)
                calibrated[evict] = out
            original = features(vitreg.Model(name), evaluation)
            configs = (("drop-in softmax-1", vitreg.Model(name, attention="softmax1")),
                       ("calibrated sink", vitreg.Model(calibrated[False])),
                       ("calibrated sink, sink evicted", vitreg.Model(calibrated[True])),
                       ("sink evicted (softmax)", vitreg.Model(name, evict="sink")))
            for label, model in configs:
                cls, patch = features(model, evaluation)
                c, p = cosines(cls, original[0]), cosines(patch, original[1])
                print(f"{name:28s} {label:34s} {c.mean():12.4f} {c.min():12.4f} {p.mean():10.4f}")


if __name__ == "__main__":
    main()
