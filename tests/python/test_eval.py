"""vitreg.eval_correspondence / eval_segmentation / eval_knn and `vitreg eval`: each metric equals
the independent PyTorch reference (tests/reference/eval_reference.py) computed on the same
features, on Debian's data read in place (opencv-doc's graf and aloe pairs, skimage's motorcycle
pair, horse silhouette and lfw_subset; scripts/setup.sh --tests installs them) and on synthetic
cases with known answers; the command writes what Python returns; bad inputs are refused by name
with nothing written."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("VITREG_BINARY", os.path.join(ROOT, "build", "apps", "vitreg"))
sys.path[:0] = [os.path.join(ROOT, "tests", "reference"), os.path.join(ROOT, "tests")]
import eval_reference as ref  # noqa: E402
from eval_folders import OPENCV, PAIRS, SKIMAGE, horse_folder, lfw_folder  # noqa: E402

MODEL = os.path.join(ROOT, "weights", "vitreg-fmnist-softmax-reg4.safetensors")
RESIZE = "long:224"  # small grids keep the test fast


@pytest.fixture(scope="module")
def model():
    return vitreg.Model(MODEL, threads=1)


def features(model, path, resize):
    return model.forward(model.preprocess(path, resize=resize)[None])


def truth_of(path):
    if path.endswith(".xml"):
        text = open(path).read()
        return ref.homography_map([float(v) for v in text.split("<data>")[1].split("</data>")[0].split()])
    if path.endswith(".npz"):
        return ref.disparity_map(np.load(path)["arr_0"])
    if path.endswith(".png"):
        return ref.disparity_map(np.array(Image.open(path), dtype=np.float64))
    return ref.homography_map([float(v) for v in open(path).read().split()])


def test_correspondence_equals_the_reference_on_debian_pairs(model):
    got = vitreg.eval_correspondence([model], PAIRS, resize=RESIZE, threads=1)
    assert got["protocol"]["parameters"]["alphas"] == [0.05, 0.10, 0.15]
    for pair, detail in zip(PAIRS, got["details"][0]["pairs"]):
        a, b = features(model, pair[0], RESIZE)["patch"][0], features(model, pair[1], RESIZE)["patch"][0]
        want, matches, scored = ref.pck(a, detail["geometry_first"], b, detail["geometry_second"], 14, truth_of(pair[2]),
                                        [0.05, 0.10, 0.15])
        assert (detail["matches"], detail["scored"]) == (matches, scored), pair
        assert scored > 20, pair
        for alpha, w in zip(["pck@0.05", "pck@0.10", "pck@0.15"], want):
            assert abs(detail[alpha] - w) <= 1e-12, (pair, alpha, detail[alpha], w)
    row = got["rows"][0]
    per_pair = got["details"][0]["pairs"]
    assert abs(row["pck@0.10"] - np.mean([p["pck@0.10"] for p in per_pair])) < 1e-12


def test_identity_geometry_gives_pck_one(tmp_path, model):
    identity = tmp_path / "identity.txt"
    identity.write_text("1 0 0\n0 1 0\n0 0 1\n")
    flat = tmp_path / "zero_shift.png"  # a disparity map of ones: the second view is the first moved one pixel left
    Image.fromarray(np.ones((640, 800), np.uint8)).save(flat)
    g = f"{OPENCV}/graf1.png"
    got = vitreg.eval_correspondence([model], [(g, g, str(identity)), (g, g, str(flat))], resize=RESIZE)
    for p in got["details"][0]["pairs"]:
        assert p["pck@0.05"] == 1.0 and p["scored"] == p["matches"] > 100


def test_segmentation_equals_the_reference_on_the_horse(tmp_path, model):
    images, masks = horse_folder(tmp_path)
    got = vitreg.eval_segmentation([model], str(images), str(masks), resize=RESIZE, memory_per_image=40, seed=7, threads=1)
    detail = got["details"][0]
    assert detail["classes"] == 2
    names = sorted(os.listdir(images))
    train, test = [], []
    for i, (name, geometry) in enumerate(zip(names, detail["geometry"])):
        f = features(model, str(images / name), RESIZE)["patch"][0]
        mask = np.array(Image.open(masks / name))  # palette indices
        labels = ref.patch_labels(mask, geometry, 14, f.shape[0], f.shape[1])
        (train if i < 3 else test).append((f.reshape(-1, f.shape[2]).astype(np.float64), labels))
    knn_miou, knn_acc, memory = ref.hummingbird(train, test, 2, k=30, temperature=0.02, per_image=40, seed=7)
    lin_miou, lin_acc = ref.linear_probe(train, test, 2)
    row = got["rows"][0]
    assert row["memory"] == memory == 120
    assert abs(row["knn_miou"] - knn_miou) < 1e-9 and abs(row["knn_accuracy"] - knn_acc) < 1e-9
    assert abs(row["linear_miou"] - lin_miou) < 1e-6 and abs(row["linear_accuracy"] - lin_acc) < 1e-6
    assert 0.3 < row["knn_miou"] <= 1 and 0.3 < row["linear_miou"] <= 1
    assert got["protocol"]["seed"] == 7 and len(got["protocol"]["split"]["test"]) == 3


def test_knn_accuracy_equals_the_reference_on_lfw(tmp_path, model):
    folder = lfw_folder(tmp_path)
    for feature in ["cls", "pooled"]:
        got = vitreg.eval_knn([model], str(folder), resize="112x112", feature=feature, threads=1)
        feats, labels = [], []
        for c, name in enumerate(["face", "nonface"]):
            for f in sorted(os.listdir(folder / name)):
                feats.append(features(model, str(folder / name / f), "112x112")[feature][0])
                labels.append(c)
        want, pred = ref.knn_accuracy(np.array(feats, np.float64), labels, 2, k=20, temperature=0.07)
        assert got["details"][0]["predicted"] == pred.tolist(), feature
        assert abs(got["rows"][0]["accuracy"] - want) < 1e-12
        assert want > 0.6, "faces and non-faces are told apart above chance"


def run_cli(*args):
    return subprocess.run([BINARY, "eval", *args], capture_output=True, text=True)


def test_the_command_writes_what_python_returns(tmp_path, model):
    out = tmp_path / "out"
    r = run_cli("correspondence", MODEL, MODEL + "@softmax1", "--pair", *PAIRS[0], "--resize", RESIZE, "-o", str(out))
    assert r.returncode == 0, r.stderr
    written = json.load(open(out / "eval.json"))
    got = vitreg.eval_correspondence([MODEL, MODEL + "@softmax1"], PAIRS[:1], resize=RESIZE)
    assert [row["config"] for row in written["rows"]] == [row["config"] for row in got["rows"]]
    for w, g in zip(written["rows"], got["rows"]):
        for key in ["pck@0.05", "pck@0.10", "pck@0.15"]:
            assert abs(w[key] - g[key]) < 1e-9
    csv = (out / "eval.csv").read_text().splitlines()
    assert csv[0] == "config,pck@0.05,pck@0.10,pck@0.15,matches,scored" and len(csv) == 3
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2 and "H1to3p.xml" in html
    assert (out / "matches-1-1.png").stat().st_size > 1000


def refused(tmp_path, args, *words):
    out = tmp_path / "refused"
    r = run_cli(*args, "-o", str(out))
    assert r.returncode != 0
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    assert not out.exists(), "nothing is written"


def test_bad_inputs_are_refused_by_name_with_nothing_written(tmp_path):
    g = f"{OPENCV}/graf1.png"
    bad = tmp_path / "two_by_three.xml"
    bad.write_text(open(f"{OPENCV}/H1to3p.xml").read().replace("<rows>3</rows>", "<rows>2</rows>"))
    refused(tmp_path, ["correspondence", MODEL, "--pair", g, g, str(bad), "--resize", RESIZE], str(bad), "3x3")
    eight = tmp_path / "eight.txt"
    eight.write_text("1 0 0 0 1 0 0 0")
    refused(tmp_path, ["correspondence", MODEL, "--pair", g, g, str(eight), "--resize", RESIZE], str(eight), "3x3")

    images, masks = horse_folder(tmp_path)
    small = masks / "horse4.png"
    Image.open(small).resize((200, 164)).save(small)
    refused(tmp_path, ["segmentation", MODEL, "--images", str(images), "--masks", str(masks), "--resize", RESIZE],
            str(small), "200x164")
    os.remove(small)
    refused(tmp_path, ["segmentation", MODEL, "--images", str(images), "--masks", str(masks), "--resize", RESIZE],
            str(small), "missing")

    classes = tmp_path / "classes"
    for name, count in [("a", 3), ("b", 1)]:
        (classes / name).mkdir(parents=True)
        for i in range(count):
            Image.fromarray(np.full((28, 28, 3), 40 * i, np.uint8)).save(classes / name / f"{i}.png")
    refused(tmp_path, ["knn", MODEL, "--images", str(classes)], str(classes / "b"), "two images")
    with pytest.raises(vitreg.UsageError, match="two images"):
        vitreg.eval_knn([MODEL], str(classes))
