"""vitreg.explore, as a notebook user meets it: the page's stored rows equal Model.trace's
attention (the Probe) within the page's 8-bit quantization, norms and abstention likewise; the
Jupyter view is a sandboxed iframe holding the whole page in ASCII; mistakes are vitreg.Error."""
import base64
import json
import os
import re
import zlib

import numpy as np
import pytest

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
IMAGE = os.path.join(ROOT, "assets", "images", "coffee.jpg")
SHIPPED = "vitreg-untrained-s14-d192-reg4"


def data_of(html):
    m = re.search(r'<script id="vitreg-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def q8(blob):
    raw = base64.b64decode(blob["data"])
    raw = zlib.decompress(raw) if blob["codec"] == "deflate" else raw
    scale = np.frombuffer(base64.b64decode(blob["scale"]), "<f4").reshape(blob["shape"][:-1])
    return np.frombuffer(raw, np.uint8).reshape(blob["shape"]) * scale[..., None]


@pytest.fixture(scope="module")
def page():
    m = vitreg.Model(SHIPPED, threads=1)
    return m, vitreg.explore([m, SHIPPED + "@softmax1"], IMAGE, queries="stride:3", title="notebook")


def test_rows_equal_the_trace(page):
    m, p = page
    d = data_of(p.html)
    assert d["title"] == "notebook" and d["live"] is False
    first, second = d["images"][0]["configs"]
    assert (first["attention"], second["attention"]) == ("softmax", "softmax1")
    queries = first["queries"]
    assert queries[:5] == [0, 1, 2, 3, 4]  # CLS, the registers
    assert len(queries) == 5 + 6 * 6  # a 16x16 grid at stride 3, centred
    x = m.preprocess(IMAGE)[None]
    names = [f"patch:{(q - 5) // 16},{(q - 5) % 16}" for q in queries[5:]]
    tr = m.trace(x, attention_layers="all", queries=["cls", "reg:0", "reg:1", "reg:2", "reg:3", *names], norms=True)
    want = tr["attention"][:, 0]  # [layers, heads, queries, tokens]
    got = q8(first["rows"])
    assert got.shape == want.shape
    tol = want.max(-1, keepdims=True) / 510 + 1e-7
    assert (np.abs(got - want) <= tol).all(), np.abs(got - want).max()
    norms = q8(first["norms"])
    assert np.abs(norms - tr["norms"][:, 0]).max() <= tr["norms"][:, 0].max() / 510 + 1e-5
    assert q8(first["rollout"]).shape == (len(queries), first["tokens"])


def test_jupyter_view_is_a_sandboxed_iframe_in_ascii(page):
    _, p = page
    html = p._repr_html_()
    assert html.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in html
    assert html.isascii()
    assert p.size == len(p.html.encode()) and "ExplorePage" in repr(p)


def test_save_writes_the_page(page, tmp_path):
    _, p = page
    out = tmp_path / "explore.html"
    p.save(out)
    assert out.read_text(encoding="utf-8") == p.html


def test_mistakes_are_errors():
    with pytest.raises(TypeError, match="incompatible function arguments"):
        vitreg.explore(SHIPPED, IMAGE, bogus=1)
    with pytest.raises(vitreg.UsageError, match="stride"):
        vitreg.explore(SHIPPED, IMAGE, queries="stride:0")
    with pytest.raises(vitreg.ImageError, match="no-such.jpg"):
        vitreg.explore(SHIPPED, os.path.join(ROOT, "no-such.jpg"))
