"""vitreg.compare, as a notebook user meets it: the same statistics as the stats.json that
`vitreg compare` writes for the same models and images (numbers within a tolerance that
summation order cannot break), models given as vitreg.Model objects or as names."""
import json
import math
import os
import subprocess

import pytest

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("VITREG_BINARY", os.path.join(ROOT, "build", "apps", "vitreg"))
ASSETS = os.path.join(ROOT, "assets", "images")
SINK = os.path.join(ROOT, "tests", "fixtures", "models", "sink_reg2_f32.safetensors")
SHIPPED = "vitreg-untrained-s14-d192-reg4"
IMAGES = [os.path.join(ASSETS, "chelsea.png"), os.path.join(ASSETS, "retina.jpg")]

# Numbers as computed: relative to their size. Numbers written as text (stats.csv's 6 significant
# digits) and the summary read back from them: one unit in the last digit written.
COMPUTED, WRITTEN = 1e-6, 1e-5


def assert_close(got, want, tolerance=COMPUTED, where="stats"):
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), where
        for key in want:
            assert_close(got[key], want[key], WRITTEN if key == "summary" else tolerance, f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, tolerance, f"{where}[{i}]")
    elif isinstance(want, str) and isinstance(got, str) and got != want:
        assert_close(float(got), float(want), WRITTEN, where)  # a number as written (else float() raises)
    elif isinstance(want, float) or isinstance(got, float):
        assert math.isclose(got, want, rel_tol=tolerance, abs_tol=1e-12), (where, got, want)
    else:
        assert got == want, (where, got, want)


def test_compare_returns_what_the_command_writes(tmp_path):
    r = subprocess.run([BINARY, "compare", SHIPPED, SHIPPED + "@softmax1", SINK, "--images", *IMAGES, "--resize", "224x224",
                        "--mad-k", "8", "--threads", "2", "-o", str(tmp_path)], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    cli = json.load(open(tmp_path / "stats.json"))
    py = vitreg.compare([vitreg.Model(SHIPPED), SHIPPED + "@softmax1", SINK], IMAGES, resize="224x224", mad_k=8, threads=1)
    assert_close(py, cli)
    assert [c["config"] for c in py["summary"]["configs"]] == [SHIPPED, SHIPPED + "@softmax1 (retrofit)", "sink_reg2_f32"]
    assert len(py["rows"]) == 6 and py["mad_k"] == 8


def test_compare_takes_one_model_and_image_and_refuses_mistakes():
    one = vitreg.compare(SHIPPED, IMAGES[0], resize="224x224", norm_threshold=5.0)
    assert one["norm_threshold"] == 5.0 and len(one["rows"]) == 1
    assert one["summary"]["configs"][0]["best"] == []
    with pytest.raises(TypeError, match="incompatible function arguments"):  # a keyword it does not name
        vitreg.compare(SHIPPED, IMAGES[0], mad=3)
    with pytest.raises(vitreg.UsageError, match="unknown suffix '@relu'"):
        vitreg.compare(SHIPPED + "@relu", IMAGES[0])
