"""vitreg.defects and the artifact rule from Python: the same arrays as `vitreg defects` and as the
PyTorch reference's fixtures, the rule's keywords in compare, and bad keywords refused."""
import os
import subprocess
import sys

import numpy as np
import pytest

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("VITREG_BINARY", os.path.join(ROOT, "build", "apps", "vitreg"))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import vit_reference as ref  # noqa: E402

PLANTED = os.path.join(FIXTURES, "defects", "planted_direction_f16.safetensors")


def fixture(name):
    tensors, metadata = ref.read_safetensors(os.path.join(FIXTURES, "defects", name))
    return {k: v.numpy() for k, v in tensors.items()}, metadata


def test_defects_match_the_reference_and_the_command(tmp_path):
    want, meta = fixture("planted.defects.safetensors")
    got = vitreg.defects(vitreg.Model(PLANTED), samples=int(meta["samples"]), seed=int(meta["seed"]),
                         top=want["singular_values"].shape[1], out=tmp_path / "py")
    assert got["directions"].dtype == np.float32 and got["directions"].shape == want["directions"].shape
    cos = np.abs(np.sum(got["directions"].astype(np.float64) * want["directions"], axis=1))
    assert np.all(cos >= 0.9999), cos
    np.testing.assert_allclose(got["singular_values"], want["singular_values"], rtol=1e-4)
    assert got["fit"] == f"{meta['samples']}-sample least-squares fit, seed {meta['seed']}"
    # The command writes the same arrays (the same library call).
    r = subprocess.run([BINARY, "defects", PLANTED, "-o", str(tmp_path / "cli"), "--samples", meta["samples"],
                        "--seed", meta["seed"], "--top", str(want["singular_values"].shape[1])],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for folder in ("cli", "py"):
        written, _ = ref.read_safetensors(str(tmp_path / folder / "defects.safetensors"))
        np.testing.assert_array_equal(written["directions"].numpy(), got["directions"])
        np.testing.assert_array_equal(written["singular_values"].numpy(), got["singular_values"])


def test_the_rule_reaches_compare_and_bad_keywords_are_refused(tmp_path):
    image = os.path.join(ROOT, "assets", "images", "chelsea.png")
    stats = vitreg.compare(PLANTED, image, resize="16x16", artifact_rule="both", defect_samples=1024)
    assert stats["artifact_rule"]["rule"] == "both"
    assert stats["artifact_rule"]["fit"] == "1024-sample least-squares fit, seed 0"
    with pytest.raises(vitreg.UsageError, match="unknown artifact rule 'angle'"):
        vitreg.compare(PLANTED, image, resize="16x16", artifact_rule="angle")
    with pytest.raises(vitreg.UsageError, match="samples must be at least 1"):
        vitreg.defects(PLANTED, samples=0)
    with pytest.raises(TypeError, match="sample=10"):
        vitreg.defects(PLANTED, sample=10)
