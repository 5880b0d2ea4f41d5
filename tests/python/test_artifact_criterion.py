"""The artifact criterion of the training recipe (weights/recipe/artifacts.py, issue #20): the
decision rule on hand-built cases, and the same numbers from vitreg's forward (vitreg.Model.trace)
as from the recipe's PyTorch model on the held-out canvases."""
import json
import os
import sys

import numpy as np
import pytest

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path[:0] = [os.path.join(ROOT, "weights", "recipe"), os.path.join(ROOT, "tests")]
import artifacts  # noqa: E402
import common  # noqa: E402
from png_util import decode_png  # noqa: E402


def case(cover_of_patch2=0.0, top_key=3, alpha=0.5, high=10.0):
    """One image: CLS + 4 patches; patch 2 (token 3) has norm `high`, the others 1; one layer,
    one head whose mean received attention peaks at `top_key` with `alpha`."""
    norms = np.array([[1.0, 1.0, 1.0, high, 1.0]])
    key_mass = np.full((1, 1, 1, 5), 0.01)
    key_mass[0, 0, 0, top_key] = alpha
    cover = np.array([[0.0, 0.0, cover_of_patch2, 0.0]])
    return artifacts.decide(norms, key_mass, np.array([3.0]), 10.0, 1, cover)


def test_decide_counts_a_high_norm_background_sink():
    r = case()
    assert r["artifact_rate"] == 1.0 and r["any_patch_rate"] == 1.0
    assert r["top_key_share"] == {"prefix": 0.0, "background": 1.0, "foreground": 0.0}
    assert r["norm_ratio"] == pytest.approx(10.0)


@pytest.mark.parametrize("kw, sink, high", [(dict(high=2.9), 1.0, 0.0), (dict(alpha=0.19), 0.0, 1.0),
                                             (dict(top_key=0), 0.0, 1.0), (dict(top_key=2), 1.0, 1.0)])
def test_decide_needs_every_condition(kw, sink, high):
    r = case(**kw)
    assert r["artifact_rate"] == 0.0
    assert (r["background_sink_rate"], r["background_high_norm_rate"]) == (sink, high)


def test_decide_foreground_counts_only_as_any_patch():
    r = case(cover_of_patch2=0.9)
    assert r["artifact_rate"] == 0.0 and r["any_patch_rate"] == 1.0
    assert r["top_key_share"]["foreground"] == 1.0
    assert case(cover_of_patch2=0.5)["artifact_rate"] == 1.0  # at most half covered: background


def test_vitreg_measures_what_pytorch_measures():
    heldout = os.path.join(ROOT, "tests", "fixtures", "heldout")
    cover_of = json.load(open(os.path.join(heldout, "foreground.json")))
    names = sorted(cover_of)[:24]
    u8 = np.stack([np.asarray(decode_png(os.path.join(heldout, n))[2], np.uint8) for n in names])
    x, cover = common.to_input(u8), np.array([cover_of[n] for n in names])
    for config in ("softmax", "softmax-reg4", "sink"):
        path = os.path.join(ROOT, "weights", f"vitreg-fmnist-{config}.safetensors")
        model, _ = common.load_model(path)
        want = artifacts.criterion(model, x, cover)
        got = artifacts.criterion_vitreg(path, x, cover)
        assert got["images"] == want["images"] == len(names)
        for key in ("artifact_rate", "any_patch_rate", "background_sink_rate",
                    "background_high_norm_rate", "top_key_share"):
            assert got[key] == want[key], (config, key)
        for key in ("norm_ratio", "kurtosis", "max_abs"):
            assert got[key] == pytest.approx(want[key], rel=1e-4), (config, key)
