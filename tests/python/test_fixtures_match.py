"""tests/fixtures_match.py (the fixture reproducibility check) passes summation-order noise and
fails real differences."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
MATCH = os.path.join(ROOT, "tests", "fixtures_match.py")


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, array) in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def make_tree(root, value=0.9817146434521397, weights=None, label=3, png=b"\x89PNG-bytes"):
    os.makedirs(os.path.join(root, "study"), exist_ok=True)
    with open(os.path.join(root, "study", "expected.json"), "w") as f:
        json.dump({"rows": [{"mass": value, "count": label, "name": "softmax"}]}, f)
    w = np.linspace(-2, 3, 64, dtype=np.float32) if weights is None else weights
    write_safetensors(os.path.join(root, "m.safetensors"),
                      {"w": ("F32", w), "ids": ("I64", np.arange(4, dtype=np.int64))}, {"k": "v"})
    with open(os.path.join(root, "x.png"), "wb") as f:
        f.write(png)


def run(a, b):
    return subprocess.run([sys.executable, MATCH, str(a), str(b)], capture_output=True, text=True)


@pytest.fixture
def reference(tmp_path):
    make_tree(tmp_path / "ref")
    return tmp_path / "ref"


def test_identical_trees_match(tmp_path, reference):
    make_tree(tmp_path / "new")
    r = run(tmp_path / "new", reference)
    assert r.returncode == 0, r.stdout
    assert "3 files compared, 0 differences" in r.stdout


def test_last_digit_of_float64_text_matches(tmp_path, reference):
    # The Zen 3 case: the 17th significant digit of a float64 sum.
    make_tree(tmp_path / "new", value=0.9817146434521398)
    assert run(tmp_path / "new", reference).returncode == 0


def test_last_bit_of_float32_tensor_matches(tmp_path, reference):
    w = np.linspace(-2, 3, 64, dtype=np.float32)
    w[5] = np.nextafter(w[5], np.float32(10))
    make_tree(tmp_path / "new", weights=w)
    assert run(tmp_path / "new", reference).returncode == 0


@pytest.mark.parametrize("change", [
    dict(value=0.9817146434521397 * (1 + 1e-9)),             # a real change in a float
    dict(label=4),                                            # an integer
    dict(weights=np.linspace(-2, 3, 64, dtype=np.float32) * np.float32(1 + 1e-5)),
    dict(png=b"\x89PNG-other"),                               # bytes of an integer format
])
def test_real_differences_fail(tmp_path, reference, change):
    make_tree(tmp_path / "new", **change)
    r = run(tmp_path / "new", reference)
    assert r.returncode == 1
    assert "1 differences" in r.stdout


def test_missing_file_fails(tmp_path, reference):
    make_tree(tmp_path / "new")
    os.remove(tmp_path / "new" / "x.png")
    r = run(tmp_path / "new", reference)
    assert r.returncode == 1 and "x.png: only in" in r.stdout
