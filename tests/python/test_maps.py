"""vitreg.maps against `vitreg maps`: the same stats.json numbers, the same arrays, the same files,
and the same refusals, on the shipped model and a shipped image.

Run by CTest with the rest of tests/python (VITREG_BINARY names the vitreg command)."""
import json
import os
import subprocess

import numpy as np
import pytest

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("VITREG_BINARY", os.path.join(ROOT, "build", "apps", "vitreg"))
ASSETS = os.path.join(ROOT, "assets", "images")
SHIPPED = "vitreg-untrained-s14-d192-reg4"
RTOL = 1e-5


def assert_same_numbers(got, want, where="stats"):
    """Every key of `want` in `got`: numbers within RTOL (relative), the rest equal."""
    if isinstance(want, dict):
        assert set(want) <= set(got), (where, sorted(set(want) - set(got)))
        for key in want:
            assert_same_numbers(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_numbers(g, w, f"{where}[{i}]")
    elif isinstance(want, float) or isinstance(got, float):
        assert got == pytest.approx(want, rel=RTOL, abs=1e-30), where
    else:
        assert got == want, where


def cli_maps(out, *args):
    r = subprocess.run([BINARY, "maps", SHIPPED, *args, "-o", str(out)], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    with open(out / "stats.json") as f:
        return json.load(f)


def test_maps_gives_the_numbers_and_files_of_the_command(tmp_path):
    image = os.path.join(ASSETS, "coffee.jpg")
    flags = ["--query", "patch:3,4", "--layers", "0,-1", "--rollout", "--discard", "0.5", "--attention", "sink",
             "--save-attention", "--save-norms", "--mad-k", "6"]
    want = cli_maps(tmp_path / "cli", image, *flags)
    m = vitreg.Model(SHIPPED, attention="sink", threads=2)
    got = vitreg.maps(m, image, out=tmp_path / "py", query="patch:3,4", layers="0,-1", rollout=True, discard=0.5,
                      save_attention=True, save_norms=True, mad_k=6)
    assert_same_numbers(got, want)
    assert got["query"] == "patch:3,4" and got["attention"] == "sink" and got["mad_k"] == 6
    attention = np.load(tmp_path / "cli" / "attention.npy")
    assert got["attention_rows"].shape == attention.shape == (2, 3, 1, 261)
    np.testing.assert_allclose(got["attention_rows"], attention, rtol=RTOL, atol=1e-7)
    np.testing.assert_allclose(got["norms"], np.load(tmp_path / "cli" / "norms.npy"), rtol=RTOL)
    # A sink row sums to 1 - abstention: below 1, here only just.
    sums = got["attention_rows"].sum(-1)
    assert np.all(sums < 1.0) and np.all(sums > 0.9)
    names = ["attention.png", "norms.png", "histogram.png", "abstention.png", "rollout.png", "stats.json",
             "attention.npy", "norms.npy"]
    assert got["files"] == [str(tmp_path / "py" / n) for n in names]
    assert sorted(os.listdir(tmp_path / "py")) == sorted(os.listdir(tmp_path / "cli")) == sorted(names)
    with open(tmp_path / "py" / "stats.json") as f:
        assert_same_numbers(json.load(f), want)


def test_maps_defaults_are_the_commands_and_nothing_is_written_without_out(tmp_path):
    image = os.path.join(ASSETS, "chelsea.png")
    want = cli_maps(tmp_path / "cli", image)
    got = vitreg.maps(SHIPPED, image, threads=2)  # a name, as the command takes it
    assert_same_numbers(got, want)
    assert got["files"] == []
    assert got["attention_rows"].shape == (6, 3, 1, 261)  # every layer, the CLS row
    np.testing.assert_allclose(got["attention_rows"].sum(-1), 1.0, atol=1e-5)
    assert got["norms"].shape == (6, 261)
    last = got["layers"][-1]
    assert last["norm_max"] == pytest.approx(float(got["norms"][-1, 5:].max()), rel=RTOL)


def test_maps_refuses_what_the_command_refuses(tmp_path):
    image = os.path.join(ASSETS, "chelsea.png")
    out = tmp_path / "never"
    for kwargs, message in [({"query": "probe"}, "attention-pool head"),
                            ({"query": "patch:16,0"}, "outside the 16x16 patch grid"),
                            ({"layers": "6"}, "out of range"),
                            ({"heads": "sum"}, "heads 'sum'"),
                            ({"discard": 1.5, "rollout": True}, r"outside \[0, 0.99\]")]:
        with pytest.raises(vitreg.UsageError, match=message):
            vitreg.maps(SHIPPED, image, out=out, **kwargs)
        assert not out.exists(), kwargs
    with pytest.raises(TypeError):
        vitreg.maps(SHIPPED, image, colour="red")
