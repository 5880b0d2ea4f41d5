"""vitreg.index, vitreg.Index and vitreg.search (issue #51): the shipped photos extracted, indexed
exactly, and each found as its own best match, from arrays and from images."""
import os

import numpy as np
import pytest

import vitreg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ASSETS = os.path.join(ROOT, "assets", "images")
SHIPPED = "vitreg-untrained-s14-d192-reg4"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("search")
    model = vitreg.Model(SHIPPED)
    vitreg.extract(model, ASSETS, tmp / "features", threads=1)
    report = vitreg.index(tmp / "features", tmp / "index", factory="Flat")
    return model, tmp, report


def test_a_flat_index_finds_each_row_as_its_own_top1(indexed):
    model, tmp, report = indexed
    assert report["factory"] == "Flat" and report["count"] == 5 and report["recall_at_10"] == 1.0
    index = vitreg.Index(tmp / "index")
    cls = np.load(tmp / "features" / "cls.npy")
    assert len(index) == 5 and index.dim == cls.shape[1] and index.info["feature"] == "cls"
    scores, ids = index.search(cls, k=3)
    assert scores.dtype == np.float32 and ids.dtype == np.int64 and scores.shape == (5, 3)
    assert (ids[:, 0] == np.arange(5)).all()
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-6)
    assert scores.base is not None  # the library's buffer, not a copy
    assert index.entry(int(ids[2, 0]))["key"].endswith(os.path.basename(index.entry(2)["path"]))
    with pytest.raises(vitreg.UsageError, match="k = 6 is outside 1..5"):
        index.search(cls, k=6)
    with pytest.raises(vitreg.UsageError, match="192-d|-d vectors"):
        index.search(np.zeros((1, 7), np.float32))


def test_search_from_images_returns_each_image_first(indexed):
    model, tmp, _ = indexed
    found = vitreg.search(tmp / "index", model, ASSETS, k=2)
    assert len(found) == 5
    for query in found:
        best = query["results"][0]
        assert best["path"] == query["query"]
        assert best["score"] == pytest.approx(1.0, abs=1e-5)


def test_search_takes_the_extracts_pixel_options_and_refuses_others(indexed):
    model, tmp, _ = indexed
    images = [os.path.join(ASSETS, "coffee.jpg"), os.path.join(ASSETS, "chelsea.png")]
    vitreg.extract(model, images, tmp / "small", threads=1, resize="long:112", resample="torch")
    vitreg.index(tmp / "small", tmp / "small-index", factory="Flat")
    for query in vitreg.search(tmp / "small-index", model, images, k=1):  # long:112, torch: as extracted
        assert query["results"][0]["path"] == query["query"]
        assert query["results"][0]["score"] == pytest.approx(1.0, abs=1e-6)
    found = vitreg.search(tmp / "small-index", model, images[0], k=1, resize="long:112")  # agrees
    assert found[0]["results"][0]["score"] == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(vitreg.UsageError, match="resize= eval contradicts .* resize= long:112"):
        vitreg.search(tmp / "small-index", model, images[0], k=1, resize="eval")
    with pytest.raises(vitreg.UsageError, match="resample= pil contradicts"):
        vitreg.search(tmp / "small-index", model, images[0], k=1, resample="pil")


def test_bad_index_folders_are_refused_by_name(tmp_path):
    with pytest.raises(vitreg.UsageError, match="index.json"):
        vitreg.Index(tmp_path)
    with pytest.raises(vitreg.UsageError, match="manifest.jsonl"):
        vitreg.index(tmp_path, tmp_path / "index")
