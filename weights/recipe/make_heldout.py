#!/usr/bin/env python3
"""Write the held-out set (tests/fixtures/heldout/) and the in-distribution samples (assets/indist/).

    python3 weights/recipe/make_heldout.py

Both are 112x112 RGB PNG canvases made exactly like the training data (common.CanvasSynth),
but from Fashion-MNIST *test* items 5000-9999 (training uses the train split, the
validation inside train.py uses test items 0-4999) and their own seeds.  Deterministic.

tests/fixtures/heldout/labels.json      file -> multi-hot label vector (classes in
                                        common.CLASSES order)
tests/fixtures/heldout/foreground.json  file -> per-patch item coverage (8x8 patches,
                                        row-major, fraction of the patch covered by an
                                        item's alpha); used by evaluate.py to tell
                                        foreground from background patches
"""

import argparse
import json
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--indist", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    te_x, te_y = common.load_fmnist("t10k")
    synth = common.CanvasSynth(te_x[5000:], te_y[5000:], common.load_textures())

    out = os.path.join(REPO, "tests", "fixtures", "heldout")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng([args.seed, 3])
    labels, fg = {}, {}
    for i in range(args.n):
        u8, lab, cover = synth.sample(rng)
        name = f"heldout_{i:03d}.png"
        Image.fromarray(u8).save(os.path.join(out, name), optimize=True)
        labels[name] = [int(v) for v in lab]
        fg[name] = [round(float(c), 3) for c in cover]
    with open(os.path.join(out, "labels.json"), "w") as f:
        f.write("{\n" + ",\n".join(f'"{k}": {json.dumps(labels[k])}' for k in sorted(labels))
                + "\n}\n")
    with open(os.path.join(out, "foreground.json"), "w") as f:
        json.dump(fg, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")

    ind = os.path.join(REPO, "assets", "indist")
    os.makedirs(ind, exist_ok=True)
    rng = np.random.default_rng([args.seed, 4])
    made = 0
    prov = {}
    while made < args.indist:
        u8, lab, _ = synth.sample(rng)
        names = "+".join(c for c, v in zip(common.CLASSES, lab) if v)
        fn = f"fmnist_canvas_{made}_{names}.png"
        Image.fromarray(u8).save(os.path.join(ind, fn), optimize=True)
        info = dict(synth.last_info)
        for it in info["items"]:
            it["index"] += 5000  # index in the Fashion-MNIST t10k (test) split
        prov[fn] = info
        made += 1
    for fn, info in prov.items():
        print(fn, json.dumps(info))
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"wrote {args.n} held-out canvases to {out} ({total} bytes), "
          f"{args.indist} samples to {ind}")


if __name__ == "__main__":
    sys.exit(main())
