"""import vitreg, as a Python user meets it (issue #18): parity with the PyTorch reference, traces
equal to what `vitreg maps` writes, batch jobs equal to the command's, forwards that run in
parallel threads, and errors as Python exceptions.

Run by CTest: PYTHONPATH=build/python python3 -m pytest tests/python, with VITREG_BINARY naming
the vitreg command and VITREG_ROOT the source tree."""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("VITREG_BINARY", os.path.join(ROOT, "build", "apps", "vitreg"))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
ASSETS = os.path.join(ROOT, "assets", "images")
SHIPPED = "vitreg-untrained-s14-d192-reg4"
TOLERANCE = 1e-4  # relative to the output's scale, as the C++ parity test

sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "reference")]
import vit_reference as ref  # noqa: E402
from file_tree import tree  # noqa: E402


def relative_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


@pytest.fixture(scope="module")
def model():
    return vitreg.Model(SHIPPED, threads=2)


# ---- parity ---------------------------------------------------------------------------------

CASES = json.load(open(os.path.join(FIXTURES, "cases.json")))


PRECISION_CASES = json.load(open(os.path.join(FIXTURES, "precision.json")))


@pytest.mark.parametrize("case", PRECISION_CASES, ids=[c["case"] for c in PRECISION_CASES])
def test_reduced_precision_runs_from_python_as_from_cpp(case):
    """int8 per token and per tensor (the fixture's calibration): within half of the quantization
    error of the reference's simulation (see tests/test_precision.cpp for why half)."""
    want = {k: v.numpy() for k, v in ref.read_safetensors(os.path.join(FIXTURES, case["case"]))[0].items()}
    path = os.path.join(FIXTURES, case["model"])
    scales = os.path.join(FIXTURES, case["scales"])
    for mode, kwargs in (("int8", {}), ("int8w7", {"int8_weights": 7}),
                         ("int8_per_tensor", {"act_quant": "per-tensor", "scales": scales})):
        m = vitreg.Model(path, precision="int8", **kwargs)
        assert m.config["precision"].startswith("int8 per-t")
        assert m.config["precision"].endswith(", 7-bit weights") == (mode == "int8w7")
        out = m.forward(want["input"].astype(np.float32))
        quantization = relative_error(want[mode + "_cls"], want["fp32_cls"])
        assert relative_error(out["cls"], want[mode + "_cls"]) < 0.5 * quantization
    with pytest.raises(vitreg.UsageError, match="per-tensor applies to --precision int8 only"):
        vitreg.Model(path, precision="bf16", act_quant="per-tensor", scales=scales)
    with pytest.raises(vitreg.UsageError, match="--int8-weights 7 applies to --precision int8 only"):
        vitreg.Model(path, precision="fp32", int8_weights=7)
    with pytest.raises(vitreg.IoError, match="missing.json"):
        vitreg.Model(path, precision="int8", act_quant="per-tensor", scales=os.path.join(FIXTURES, "missing.json"))


INTERVENTION_CASES = [c for c in json.load(open(os.path.join(FIXTURES, "interventions.json")))
                      if c["kind"] in ("evict", "ttr")]


@pytest.mark.parametrize("case", INTERVENTION_CASES, ids=[c["name"] for c in INTERVENTION_CASES])
def test_interventions_run_from_python_as_from_cpp(case):
    """Eviction and test-time registers as Model arguments, against the reference's outputs."""
    want = {k: v.numpy() for k, v in ref.read_safetensors(os.path.join(FIXTURES, case["file"]))[0].items()}
    kwargs = {"evict": case["evict"]} if case["kind"] == "evict" else {
        "ttr": case["ttr"], "register_neurons": ",".join(f"{l}:{n}" for l, n in case["neurons"])}
    m = vitreg.Model(os.path.join(FIXTURES, case["model"]), **kwargs)
    out = m.forward(want["input"].astype(np.float32))
    assert relative_error(out["cls"], want["cls"]) < TOLERANCE
    if "registers" in want:
        assert out["registers"].shape == want["registers"].shape
        assert relative_error(out["registers"], want["registers"]) < TOLERANCE
    assert m.config["test_time_registers"] == case.get("ttr", 0)
    assert m.config["intervention"] != "none"


def test_repairs_as_model_suffixes():
    """The repair suffixes in Model(...): @inpaint=artifacts equals the reference's neighbour mean
    on the planted model; an impossible repair is refused naming it."""
    case = next(c for c in json.load(open(os.path.join(FIXTURES, "interventions.json")))
                if c["name"] == "inpaint_planted")
    want = {k: v.numpy() for k, v in ref.read_safetensors(os.path.join(FIXTURES, case["file"]))[0].items()}
    path = os.path.join(FIXTURES, case["model"])
    m = vitreg.Model(path + "@inpaint=artifacts")
    assert m.config["intervention"] == "repair=inpaint=artifacts"
    out = m.forward(want["input"].astype(np.float32))
    assert relative_error(out["patch"].reshape(want["patches"].shape), want["patches"]) < TOLERANCE
    plain = vitreg.Model(path).forward(want["input"].astype(np.float32))
    assert relative_error(plain["patch"].reshape(want["patches"].shape), want["patches"]) > 1e-2
    with pytest.raises(vitreg.UsageError, match="@registers=zero: the model has no register tokens"):
        vitreg.Model(path + "@registers=zero")
    with pytest.raises(vitreg.UsageError, match="expected @denoise=shift:K"):
        vitreg.Model(path + "@denoise=shift:1")


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_features_match_the_reference_fixtures(case):
    m = vitreg.Model(os.path.join(FIXTURES, case["model"]), attention=case["attention_override"] or None,
                     pos_interp=case["pos_interp_override"] or None)
    assert m.config["dim"] == case["config"]["dim"]
    assert m.config["attention"] == case["config"]["attention"]
    assert m.config["pos_interp"] == case["config"]["pos_interp"]
    want = {k: v.numpy() for k, v in ref.read_safetensors(os.path.join(FIXTURES, case["case"]))[0].items()}
    out = m.forward(want["input"].astype(np.float32))  # stored as F32: exact
    assert relative_error(out["cls"], want["cls"]) < TOLERANCE
    B, h, w, D = out["patch"].shape
    assert (h * m.config["patch"], w * m.config["patch"]) == (case["height"], case["width"])
    assert relative_error(out["patch"].reshape(B, h * w, D), want["patches"]) < TOLERANCE
    config = case["config"]
    assert m.config["family"] == config.get("family", "dinov2")
    if "pooled" in want:  # the other families: fc_norm'd means, and cls = pooled without a class token
        assert relative_error(out["pooled"], want["pooled"]) < TOLERANCE
    else:
        assert np.allclose(out["pooled"], out["patch"].mean(axis=(1, 2)), atol=1e-6)
    if config.get("proj_dim", 0):
        assert out["embedding"].shape == (B, config["proj_dim"])
        assert relative_error(out["embedding"], want["embedding"]) < TOLERANCE
    else:
        assert "embedding" not in out


@pytest.mark.parametrize("name", ["open_clip_quickgelu", "timm_avg_fcnorm", "timm_deit3"])
def test_interventions_on_the_other_families_match_the_reference_run_live(name):
    """Test-time registers (zeros after norm_pre, after the class token when there is one) and the
    eviction of fixed keys on a CLIP tower and two timm models, against the reference in float64."""
    path = os.path.join(FIXTURES, "models", name)
    cfg, weights = ref.load_model(path)
    x = np.random.default_rng(7).standard_normal((2, 3, 2 * cfg.patch, 3 * cfg.patch)).astype(np.float32)
    m = vitreg.Model(path, ttr=1, register_neurons="1:3")
    want = ref.forward(cfg, weights, torch.from_numpy(x), intervention=ref.Intervention(ttr=1, neurons=((1, 3),)))
    out = m.forward(x)
    assert out["registers"].shape == (2, 1, cfg.dim)
    for key, got in (("cls", out["cls"]), ("registers", out["registers"]), ("pooled", out["pooled"])):
        assert relative_error(got, want[key]) < TOLERANCE, key
    # patch:0,1 evicted from every head's keys: token P + 1 (P = 1 with a class token, else 0)
    P = 1 if cfg.class_token else 0
    mask = ref.eviction_mask(2, cfg.depth, cfg.heads, P + 6, tokens=(P + 1,))
    want = ref.forward(cfg, weights, torch.from_numpy(x), intervention=ref.Intervention(evict=mask))
    out = vitreg.Model(path, evict="patch:0,1").forward(x)
    assert relative_error(out["patch"].reshape(2, 6, -1), want["patches"]) < TOLERANCE
    if cfg.proj_dim:
        assert relative_error(out["embedding"], want["embedding"]) < TOLERANCE


def test_extract_project_writes_the_clip_embedding(tmp_path):
    m = vitreg.Model(os.path.join(FIXTURES, "models", "open_clip_quickgelu"))
    image = os.path.join(ASSETS, "chelsea.png")
    vitreg.extract(m, [image], tmp_path / "out", project=True)
    embedding = np.load(tmp_path / "out" / "embedding.npy")
    want = m.forward(m.preprocess(image)[None])["embedding"]
    assert embedding.shape == (1, 16)
    np.testing.assert_array_equal(embedding, want)
    with pytest.raises(vitreg.UsageError, match="has no projection"):
        vitreg.extract(vitreg.Model(os.path.join(FIXTURES, "models", "timm_deit3")), [image], tmp_path / "deit",
                       project=True)


def test_a_trace_matches_the_pytorch_reference_run_live():
    """The reference runs here, in float64, on a register model with a learned sink: features,
    every head's attention rows of two queries, abstention, key mass, norms and the last block."""
    path = os.path.join(FIXTURES, "models", "sink_reg2_f32.safetensors")
    cfg, weights = ref.load_model(path)
    rng = np.random.default_rng(5)
    m = vitreg.Model(path)
    p = m.config["patch"]
    x = rng.standard_normal((2, 3, 3 * p, 5 * p)).astype(np.float32)
    want = ref.forward(cfg, weights, torch.from_numpy(x), trace=True)
    t = want["trace"]
    R = m.config["registers"]
    q_patch = 1 + R + 1 * 5 + 2  # patch:1,2
    got = m.trace(x, attention_layers="all", queries=["cls", "patch:1,2"], norms=True, abstention=True, key_mass=True,
                  blocks=[-1], blocks_normed=True)
    assert relative_error(got["cls"], want["cls"].numpy()) < TOLERANCE
    assert relative_error(got["patch"].reshape(2, 15, -1), want["patches"].numpy()) < TOLERANCE
    assert got["queries"] == [0, q_patch]
    attn = t["attn"].numpy()  # [B, L, heads, N, N]
    for slot, q in enumerate((0, q_patch)):
        assert relative_error(got["attention"][:, :, :, slot, :], attn[:, :, :, q, :].transpose(1, 0, 2, 3)) < TOLERANCE
    assert relative_error(got["abstention"], t["abstention"].numpy().transpose(1, 0, 2, 3)) < TOLERANCE
    assert got["abstention"].min() > 0  # a sink abstains
    assert relative_error(got["key_mass"], t["key_mass"].numpy().transpose(1, 0, 2, 3)) < TOLERANCE
    assert relative_error(got["norms"], t["norms"].numpy().transpose(1, 0, 2)) < TOLERANCE
    assert relative_error(got["kurtosis"], t["kurtosis"].numpy().T) < TOLERANCE
    assert relative_error(got["blocks"][0], t["blocks_normed"].numpy()[:, -1]) < TOLERANCE
    assert "profile" not in got
    timed = m.trace(x, queries=[], profile=True)
    stages = ["embed", "norms", "qkv", "attention", "proj", "fc1", "mlp_activation", "fc2", "other", "total"]
    assert list(timed["profile"]) == stages
    assert min(timed["profile"].values()) >= 0 and timed["profile"]["qkv"] > 0
    assert sum(timed["profile"][s] for s in stages[:-1]) == pytest.approx(timed["profile"]["total"], rel=1e-9)
    np.testing.assert_array_equal(timed["cls"], m.forward(x)["cls"])  # the clock reads change no bit


# ---- the same numbers as the command --------------------------------------------------------

def test_trace_equals_what_vitreg_maps_writes(model, tmp_path):
    image = os.path.join(ASSETS, "coffee.jpg")
    r = subprocess.run([BINARY, "maps", SHIPPED, image, "-o", str(tmp_path / "maps"), "--save-attention", "--save-norms",
                        "--query", "patch:3,4"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    x = model.preprocess(image)
    tr = model.trace(x[None], attention_layers="all", queries=["patch:3,4"], norms=True)
    attention = np.load(tmp_path / "maps" / "attention.npy")  # [layers, heads, 1, tokens]
    np.testing.assert_array_equal(tr["attention"][:, 0], attention)
    np.testing.assert_array_equal(tr["norms"][:, 0], np.load(tmp_path / "maps" / "norms.npy"))


def test_extract_writes_what_the_command_writes(model, tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_text("not an image")
    inputs = [ASSETS, str(bad)]
    r = subprocess.run([BINARY, "extract", SHIPPED, *inputs, "-o", str(tmp_path / "cli"), "--patch-tokens", "--chunk", "2"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 3, r.stderr
    seen = []
    s = vitreg.extract(model, inputs, tmp_path / "py", patch_tokens=True, chunk=2,  # os.PathLike too
                       progress=lambda done, total: seen.append((done, total)))
    assert (s["inputs"], s["ok"], s["failed"]) == (6, 5, 1)
    assert seen and seen[-1] == (6, 6)
    cli, py = tree(tmp_path / "cli", skip=("job.lock",)), tree(tmp_path / "py", skip=("job.lock",))
    assert sorted(cli) == sorted(py)
    for name in cli:
        assert cli[name] == py[name], name
    cls = np.load(tmp_path / "py" / "cls.npy")
    x = np.stack([model.preprocess(os.path.join(ASSETS, n)) for n in sorted(os.listdir(ASSETS)) if not n.endswith(".md")])
    np.testing.assert_array_equal(cls, model.forward(x)["cls"])


def test_extract_reads_webdataset_shards_as_the_command_does(model, tmp_path):
    """A .tar.gz shard through vitreg.extract and through the command: the same files; its
    features are the folder's; layout='shards' writes 00000.cls.npy and 00000.keys.jsonl."""
    import io
    import tarfile
    names = sorted(n for n in os.listdir(ASSETS) if not n.endswith(".md"))[:3]
    shard = tmp_path / "00000.tar.gz"
    with tarfile.open(shard, "w:gz") as tar:
        for i, n in enumerate(names):
            tar.add(os.path.join(ASSETS, n), arcname=f"{i:03d}" + os.path.splitext(n)[1])
            info = tarfile.TarInfo(f"{i:03d}.txt")
            info.size = len(n)
            tar.addfile(info, io.BytesIO(n.encode()))
    pattern = str(tmp_path / "{00000..00000}.tar.gz")
    r = subprocess.run([BINARY, "extract", SHIPPED, pattern, "-o", str(tmp_path / "cli")], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    s = vitreg.extract(model, pattern, tmp_path / "py")
    assert (s["inputs"], s["ok"], s["failed"]) == (3, 3, 0)
    cli, py = tree(tmp_path / "cli", skip=("job.lock",)), tree(tmp_path / "py", skip=("job.lock",))
    assert sorted(cli) == sorted(py)
    for name in cli:
        assert cli[name] == py[name], name
    rows = [json.loads(line) for line in open(tmp_path / "py" / "manifest.jsonl")]
    assert [(r["key"], r["caption"]) for r in rows] == [(f"{i:03d}", n) for i, n in enumerate(names)]
    vitreg.extract(model, [os.path.join(ASSETS, n) for n in names], tmp_path / "folder")
    np.testing.assert_array_equal(np.load(tmp_path / "py" / "cls.npy"), np.load(tmp_path / "folder" / "cls.npy"))
    vitreg.extract(model, str(shard), tmp_path / "layout", layout="shards")
    np.testing.assert_array_equal(np.load(tmp_path / "layout" / "00000.cls.npy"), np.load(tmp_path / "py" / "cls.npy"))
    assert len(open(tmp_path / "layout" / "00000.keys.jsonl").readlines()) == 3
    with pytest.raises(vitreg.UsageError, match="layout='tiles'"):
        vitreg.extract(model, str(shard), tmp_path / "bad", layout="tiles")


def test_study_returns_what_the_command_writes(tmp_path):
    heldout = os.path.join(FIXTURES, "heldout")
    images = [os.path.join(heldout, f"heldout_{i:03d}.png") for i in range(4)]
    configs = ["vitreg-fmnist-softmax", "vitreg-fmnist-sink@int8"]
    # A smaller defect fit than the default's 16384 rows: the sanitized build's double GEMMs are slow.
    options = dict(resize="none", sizes=[112, 224], labels=os.path.join(heldout, "labels.json"), defect_samples=2048)
    r = subprocess.run([BINARY, "study", *configs, "--images", *images, "--resize", "none", "--sizes", "112,224",
                        "--labels", options["labels"], "--defect-samples", "2048", "-o", str(tmp_path)],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    cli = json.load(open(tmp_path / "study.json"))
    py = vitreg.study(configs, images, **options)
    for study in (cli, py):  # timings differ from run to run
        for c in study["configs"]:
            c["cost"].pop("ms_per_image")
            c["summary"].pop("ms_per_image")
    assert py == cli
    assert [c["name"] for c in py["configs"]] == configs
    with pytest.raises(TypeError, match="incompatible function arguments"):
        vitreg.study(configs, images, size=[112])


def test_dense_shards_merge_to_what_the_command_writes(model, tmp_path):
    options = ["--layers", "-2,-1", "--norm", "--dtype", "f16", "--pca"]
    r = subprocess.run([BINARY, "dense", SHIPPED, ASSETS, "-o", str(tmp_path / "cli"), *options],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    for k in range(2):
        s = vitreg.dense(model, ASSETS, str(tmp_path / "py"), layers="-2,-1", norm=True, dtype="f16", pca=True,
                         shard=f"{k}/2")
        assert s["out"].endswith(f"shard-{k}-of-2")
    s = vitreg.merge(str(tmp_path / "py"))
    assert (s["shards"], s["ok"]) == (2, 5)
    cli, py = tree(tmp_path / "cli", skip=("job.lock",)), tree(tmp_path / "py", skip=("job.lock",))
    for name in [n for n in cli if not n.startswith("chunks/") and n != "job.json"]:
        assert cli[name] == py[name], name


def test_dense_pca_dims_equals_the_reference_reduction_and_pca_mask_takes_arrays(model, tmp_path):
    import dense_reference
    x = model.preprocess(os.path.join(ASSETS, "chelsea.png"), resize="154x126")
    full = model.dense(x, layers="-2,-1", concat=True)                     # [9, 11, 384]
    reduced, basis = model.dense(x, layers="-2,-1", pca_dims=5, upsample="x2")
    assert reduced.shape == (18, 22, 5) and basis["components"].shape == (5, 384)
    want = dense_reference.pca_reduce(torch.from_numpy(full.reshape(-1, 384)), 5)
    cosines = (torch.from_numpy(basis["components"]).double() * want["components"]).sum(dim=1)
    assert float(cosines.min()) > 1 - 1e-6                                 # same directions, same signs
    assert relative_error(basis["explained_variance"], want["explained_variance"].numpy()) < 1e-5
    # Reduced, then upsampled: the reference's reduced grid, bilinear x2.
    up = ref.upsample_bilinear(want["reduced"].reshape(9, 11, 5), 18, 22, torch.float64)
    assert relative_error(reduced, up.numpy()) < 1e-5
    # The batch job: a joint fit over each batch is the reference's over both images' patches;
    # pca_mask takes a bool array of the grid's size for every input.
    images = [os.path.join(ASSETS, "chelsea.png"), os.path.join(ASSETS, "coffee.jpg")]
    grid_mask = np.zeros((9, 11), dtype=bool)
    grid_mask[2:7, 3:8] = True
    s = vitreg.dense(model, images, str(tmp_path / "joint"), layers="-2,-1", resize="154x126", pca_dims=5,
                     pca_joint=True, batch=2, pca="foreground", pca_mask=grid_mask)
    assert s["ok"] == 2
    both = np.concatenate([model.dense(path, layers="-2,-1", concat=True, resize="154x126").reshape(-1, 384)
                           for path in images])
    joint = dense_reference.pca_reduce(torch.from_numpy(both), 5)
    written = np.concatenate([np.load(tmp_path / "joint" / f"{r}.npy").reshape(-1, 5) for r in range(2)])
    assert relative_error(written, joint["reduced"].numpy()) < 1e-5
    assert (tmp_path / "joint" / "1.pca.png").exists()
    with pytest.raises(vitreg.UsageError, match="must be in 1..384"):
        model.dense(x, layers="-2,-1", pca_dims=400)
    # A mask with too few foreground patches is that input's failure (a row of the manifest).
    s = vitreg.dense(model, images[:1], str(tmp_path / "few"), resize="154x126", pca="foreground",
                     pca_mask=np.zeros((9, 11), dtype=np.uint8))
    assert (s["ok"], s["failed"]) == (0, 1)
    with open(tmp_path / "few" / "manifest.jsonl") as f:
        assert "fewer than 3 foreground patches" in json.loads(f.readline())["error"]


def test_model_dense_returns_the_array_the_command_writes(model, tmp_path):
    image = os.path.join(ASSETS, "chelsea.png")
    options = {"layers": "-2,-1", "norm": True, "window": 84, "stride": 56, "scales": [0.5, 1.0], "flip": True,
               "upsample": "jbu:x2", "resize": "154x126"}
    r = subprocess.run([BINARY, "dense", SHIPPED, image, "-o", str(tmp_path / "cli"), "--layers", "-2,-1", "--norm",
                        "--window", "84", "--stride", "56", "--image-scales", "0.5,1", "--flip", "--upsample", "jbu:x2",
                        "--resize", "154x126"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    written = np.load(tmp_path / "cli" / "0.npy")
    got = model.dense(image, **options)
    assert got.dtype == np.float32 and got.shape == written.shape == (2, 18, 22, 192)
    assert relative_error(got, written) == 0
    # A preprocessed float32 image gives the same; f16 as the file would store it.
    x = model.preprocess(image, resize="154x126")
    half = model.dense(x, **{k: v for k, v in options.items() if k != "resize"}, dtype="f16")
    assert half.dtype == np.float16
    assert np.array_equal(half, got.astype(np.float16))
    # The window's crops at scale 1 alone differ from one forward of the whole image.
    plain = model.dense(x, layers="-1")
    windowed = model.dense(x, layers="-1", window=84, stride=56)
    assert plain.shape == windowed.shape == (9, 11, 192)
    assert relative_error(windowed, plain) > 1e-3
    # Pixels come in as forward takes them: a memoryview of the same floats gives the same array;
    # a batch of two is refused.
    assert np.array_equal(model.dense(memoryview(x), layers="-1"), plain)
    with pytest.raises(vitreg.UsageError, match="dense takes one image, got a batch of 2"):
        model.dense(np.stack([x, x]), layers="-1")
    with pytest.raises(vitreg.UsageError, match="--stride 98 is larger than --window 84"):
        model.dense(x, window=84, stride=98)
    with pytest.raises(vitreg.UsageError, match="must be above 0"):
        model.dense(x, scales=[1.0, 0.0])


# ---- arrays ---------------------------------------------------------------------------------

def test_outputs_own_their_memory_and_torch_takes_them_without_a_copy(tmp_path):
    m = vitreg.Model(SHIPPED)
    x = m.preprocess(os.path.join(ASSETS, "chelsea.png"), resize="long:112")
    assert x.dtype == np.float32 and x.shape == (3, 70, 112)  # 451x300 -> 112x74 -> whole patches
    out = m.forward(x)  # one image without a batch axis
    del m
    patch = out["patch"]
    assert patch.shape == (1, 5, 8, 192) and patch.flags["C_CONTIGUOUS"] and patch.flags["WRITEABLE"]
    t = torch.from_numpy(patch)
    assert t.data_ptr() == patch.ctypes.data
    assert torch.isfinite(t).all()
    rgb = np.zeros((28, 42, 3), np.uint8)
    rgb[:, 21:] = 255
    grey = np.zeros((28, 42), np.uint8)
    grey[:, 21:] = 255
    m = vitreg.Model(SHIPPED)
    np.testing.assert_array_equal(m.preprocess(rgb, resize="none"), m.preprocess(grey, resize="none"))


def test_forwards_release_the_gil_and_run_in_parallel_threads():
    """Two threads run one-thread forwards while a third, pure-Python thread reads both threads'
    CPU clocks every 10 ms. Holding the GIL, a forward would stop the sampler (and the
    other forward); released, the sampler keeps sampling and finds both clocks advancing in the
    same interval. The measure is that overlap, not a time, so a busy machine does not fool it."""
    m = vitreg.Model(SHIPPED, threads=1)
    x = np.stack([m.preprocess(os.path.join(ASSETS, "astronaut.jpg"))] * 4)
    m.forward(x)  # warm up: workspaces
    clocks = [None, None]
    ready, done = threading.Barrier(3), threading.Event()
    intervals = {"both": 0, "one": 0, "none": 0}

    def cpu(k):
        return time.clock_gettime(clocks[k])

    def sample():
        ready.wait()
        last = [cpu(0), cpu(1)]
        while not done.is_set():
            time.sleep(0.01)
            try:
                now = [cpu(0), cpu(1)]
            except OSError:  # a worker finished
                break
            ran = sum(b - a > 0.001 for a, b in zip(last, now))
            intervals["both" if ran == 2 else "one" if ran == 1 else "none"] += 1
            last = now

    def work(k):
        clocks[k] = time.pthread_getcpuclockid(threading.get_ident())
        ready.wait()
        for _ in range(8):
            m.forward(x)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    sampler = threading.Thread(target=sample)
    for t in (*workers, sampler):
        t.start()
    for w in workers:
        w.join()
    done.set()
    sampler.join()
    busy = intervals["both"] + intervals["one"]
    print(f"two forward threads, 10 ms intervals in which their CPU clocks advanced: {intervals}")
    assert busy >= 15, "the sampler could not run while the forwards did: the GIL was held"
    # One after the other, both clocks would advance only in the intervals around a handover
    # (about 1 in 6 here); at the same time, in nearly all of them.
    assert intervals["both"] > 0.4 * busy, "the two forwards did not compute at the same time"


# ---- errors ---------------------------------------------------------------------------------

def test_errors_arrive_as_vitreg_exceptions_with_vitreg_messages(model, tmp_path):
    assert issubclass(vitreg.CheckpointError, vitreg.Error)
    assert issubclass(vitreg.ImageError, vitreg.Error)
    assert issubclass(vitreg.UsageError, ValueError)
    with pytest.raises(vitreg.CheckpointError, match="no-such-model: no such checkpoint"):
        vitreg.Model("no-such-model")
    src = os.path.join(ROOT, "weights", SHIPPED + ".safetensors")
    with open(src, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(vitreg.CheckpointError, match="cut.safetensors"):
        vitreg.Model(str(cut))
    with pytest.raises(vitreg.ImageError, match="missing.jpg.*No such file"):
        model.preprocess(str(tmp_path / "missing.jpg"))
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(20))
    with pytest.raises(vitreg.ImageError, match="broken.png"):
        model.preprocess(broken)  # os.PathLike
    x = model.preprocess(os.path.join(ASSETS, "coffee.jpg"))
    for bad, why in ((x.astype(np.float64), "got float64"),
                     (x[None, :2], "expected 3 channels"),
                     (x[:, :100, :100].copy(), "100x100 is not a positive multiple of the patch size 14"),
                     (np.asfortranarray(np.stack([x, x])), "not C-contiguous"),
                     (x[0], r"got shape \[224, 224\]")):
        with pytest.raises(vitreg.UsageError, match=why):
            model.forward(bad)
    with pytest.raises(vitreg.UsageError, match="bad --resize .huge."):
        model.preprocess(os.path.join(ASSETS, "coffee.jpg"), resize="huge")
    with pytest.raises(vitreg.UsageError, match="out of range|layer"):
        model.trace(x, attention_layers=[7])
    with pytest.raises(TypeError, match="incompatible function arguments"):  # its keywords are named parameters
        vitreg.extract(model, ASSETS, str(tmp_path / "o"), patch_tokenz=True)
    with pytest.raises(vitreg.UsageError, match="no input images"):
        (tmp_path / "empty-dir").mkdir()
        vitreg.extract(model, [str(tmp_path / "empty-dir")], str(tmp_path / "o"))
    with pytest.raises(vitreg.UsageError, match="holds a run of another"):
        vitreg.extract(model, ASSETS, str(tmp_path / "o2"))
        vitreg.extract(model, ASSETS, str(tmp_path / "o2"), resize="none")


def test_pytorch_files_load_with_a_key_as_their_safetensors_original(tmp_path):
    torch_dir = os.path.join(FIXTURES, "torch")
    want = vitreg.Model(os.path.join(FIXTURES, "models", "nometa_f32.safetensors"))
    x = np.random.default_rng(0).standard_normal((1, 3, 20, 12)).astype(np.float32)
    got = vitreg.Model(os.path.join(torch_dir, "nested_model.pth"), key="model")
    assert np.array_equal(got.forward(x)["cls"], want.forward(x)["cls"])
    with pytest.raises(vitreg.CheckpointError, match="small_key.pth: no state dict"):
        vitreg.Model(os.path.join(torch_dir, "small_key.pth"))
    marker = tmp_path / "payload-ran"
    os.environ["VITREG_PICKLE_MARKER"] = str(marker)
    try:
        with pytest.raises(vitreg.CheckpointError, match="refusing to unpickle posix.system"):
            vitreg.Model(os.path.join(torch_dir, "evil_system.pth"))
    finally:
        del os.environ["VITREG_PICKLE_MARKER"]
    assert not marker.exists()


def test_help_reads_well():
    for thing in (vitreg, vitreg.Model, vitreg.Model.forward, vitreg.Model.trace, vitreg.Model.preprocess,
                  vitreg.extract, vitreg.dense, vitreg.merge, vitreg.Error, vitreg.UsageError):
        assert thing.__doc__ and len(thing.__doc__) > 40, thing
    assert "final-normed features" in vitreg.Model.forward.__doc__


def test_the_config_docstring_names_every_key_of_the_config(model):
    doc = vitreg.Model.config.__doc__
    named = set(re.findall(r"[a-z_0-9]+", doc))
    assert set(model.config) <= named, sorted(set(model.config) - named)


def test_the_readme_example_scores_what_vitreg_linprobe_scores():
    example = os.path.join(ROOT, "examples", "python", "linear_probe.py")
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(vitreg.__file__))}
    r = subprocess.run([sys.executable, example], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    miou = float(r.stdout.split("mIoU ")[1].split(",")[0])
    r = subprocess.run([BINARY, "linprobe", SHIPPED, "--data", os.path.join(FIXTURES, "dense"), "--json"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert miou == pytest.approx(json.loads(r.stdout)["miou"], abs=1e-4)


def test_the_python_guide_example_runs_as_written(tmp_path):
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        readme = f.read()
    start = readme.index("```python\n# PYTHONPATH=build/python python3\n") + len("```python\n")
    code = readme[start:readme.index("```", start)].replace('"out/', f'"{tmp_path}/')
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(vitreg.__file__))}
    for _ in range(2):  # and again: the jobs resume a finished run
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines == ["192 4 softmax", "(2, 192) (2, 4, 192) (2, 16, 16, 192)", "(6, 1, 3, 2, 261) (6, 1, 261)"]
    assert len(os.listdir(tmp_path / "py-features" / "patch")) == 5
    assert np.load(tmp_path / "py-dense" / "0.npy").shape == (4, 16, 16, 192)
