#!/usr/bin/env python3
"""End-to-end tests of the vitreg command as a user runs it: real image files in, .npy /
safetensors out, read back with numpy; bad inputs give `vitreg: <message>` and the right exit.

usage: cli_test.py VITREG_BINARY REPO_ROOT
"""
import csv
import json
import re
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from png_util import decode_png, encode_png

VITREG, ROOT = sys.argv[1], sys.argv[2]
MODEL = "vitreg-untrained-s14-d192-reg4"
ASSETS = os.path.join(ROOT, "assets", "images")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def vitreg(*args):
    return subprocess.run([VITREG, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)


def manifest(out):
    with open(os.path.join(out, "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_text(path):
    with open(path) as f:
        return f.read()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])  # width, height


def read_safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k != "__metadata__":
            b, e = v["data_offsets"]
            out[k] = np.frombuffer(data[b:e], dtype="<f4").reshape(v["shape"])
    return out


def write_grey_images(folder, seed, count=3):
    """`count` near-uniform grey 16x16 PNGs (128 plus noise of std 5) in a new `folder`: on the
    planted model, the planted patches are their only outliers."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder)
    for i in range(count):
        pixels = np.clip(128 + rng.normal(0, 5, (16, 16, 3)), 0, 255).astype(np.uint8)
        with open(os.path.join(folder, f"grey{i}.png"), "wb") as f:
            f.write(encode_png(16, 16, pixels.tobytes()))
    return folder


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vitreg-cli-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_info_prints_resolved_config(self):
        r = vitreg("info", MODEL)
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in ["layout        dinov2", "dim           192", "depth         6", "heads         3 (head dim 64)",
                     "patch         14", "registers     4", "pos_interp    antialias", "dtype         F16",
                     "native grid   16x16 (224 px)"]:
            self.assertIn(line, r.stdout)
        r = vitreg("info", os.path.join(FIXTURES, "models", "hf_reg2"), "--attention", "softmax1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("layout        hf", r.stdout)
        self.assertIn("retrofit; trained with softmax", r.stdout)
        self.assertIn("vitreg: note: attention retrofitted", r.stderr)

    def test_info_json_is_the_config_description(self):
        r = vitreg("info", MODEL, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        info = json.loads(r.stdout)
        self.assertTrue(info["file"].endswith(MODEL + ".safetensors"), info["file"])
        c = info["config"]
        self.assertEqual((c["layout"], c["dim"], c["depth"], c["heads"], c["patch_size"], c["num_registers"], c["grid"]),
                         ("dinov2", 192, 6, 3, 14, 4, 16))
        self.assertEqual((c["pos_interp"], c["dtype"], c["attention"]), ("antialias", "F16", "softmax"))
        self.assertEqual(info["metadata"]["heads"], "3")
        r = vitreg("info", os.path.join(FIXTURES, "models", "hf_reg2"), "--attention", "softmax1", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        c = json.loads(r.stdout)["config"]
        self.assertEqual((c["layout"], c["attention"], c["trained_attention"]), ("hf", "softmax1", "softmax"))
        # run.json carries the same description
        out = os.path.join(self.tmp, "info-json-extract")
        r = vitreg("extract", MODEL, os.path.join(ASSETS, "camera.png"), "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read_json(os.path.join(out, "run.json"))["config"], json.loads(vitreg("info", MODEL, "--json").stdout)["config"])

    def test_pytorch_files_and_torch_hub_names(self):
        torch_dir = os.path.join(FIXTURES, "torch")
        image = os.path.join(ASSETS, "camera.png")
        outs = {}
        for name, model, extra in [("st", os.path.join(FIXTURES, "models", "nometa_f32.safetensors"), []),
                                   ("teacher", os.path.join(torch_dir, "teacher_module.pth"), []),
                                   ("key", os.path.join(torch_dir, "nested_model.pth"), ["--key", "model"])]:
            outs[name] = os.path.join(self.tmp, name)
            r = vitreg("extract", model, image, "-o", outs[name], "--resize", "40x24", *extra)
            self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("teacher", "key"):
            self.assertEqual(read_bytes(os.path.join(outs[name], "cls.npy")), read_bytes(os.path.join(outs["st"], "cls.npy")))
        r = vitreg("info", os.path.join(torch_dir, "small_key.pth"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("no state dict", r.stderr)
        self.assertIn("--key", r.stderr)
        marker = os.path.join(self.tmp, "payload-ran")
        r = subprocess.run([VITREG, "info", os.path.join(torch_dir, "evil_system.pth")], capture_output=True, text=True,
                           env=dict(os.environ, VITREG_PICKLE_MARKER=marker), timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("refusing to unpickle posix.system", r.stderr)
        self.assertFalse(os.path.exists(marker))
        # A torch hub name, in $TORCH_HOME only.
        hub = os.path.join(self.tmp, "torch", "hub", "checkpoints")
        os.makedirs(hub)
        shutil.copy(os.path.join(torch_dir, "dinov2_f32.pth"), os.path.join(hub, "dinov2_vits14_pretrain.pth"))
        env = dict(os.environ, TORCH_HOME=os.path.join(self.tmp, "torch"))
        r = subprocess.run([VITREG, "info", "dinov2_vits14"], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dinov2_vits14_pretrain.pth", r.stdout)
        r = subprocess.run([VITREG, "info", "dinov2_vitl14_reg4"], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("torch.hub.load('facebookresearch/dinov2', 'dinov2_vitl14_reg4')", r.stderr)

    def test_convert_writes_the_same_model_in_vitregs_layout(self):
        clip = os.path.join(FIXTURES, "models", "hf_clip")
        image = os.path.join(ASSETS, "chelsea.png")
        out = os.path.join(self.tmp, "clip.safetensors")
        r = vitreg("convert", clip, out, "--dtype", "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("(clip, F32, from hf-clip", r.stderr)
        header = read_safetensors_header(out)
        self.assertEqual(header["__metadata__"]["family"], "clip")
        self.assertEqual(header["__metadata__"]["source"], "model.safetensors")
        self.assertTrue(all(name.startswith(("blocks.", "patch_embed.", "cls_token", "pos_embed", "norm", "proj", "__"))
                            for name in header), sorted(header))
        r = vitreg("info", out)
        self.assertIn("family        clip", r.stdout)
        for name, model in (("hf", clip), ("converted", out)):
            r = vitreg("extract", model, image, "-o", os.path.join(self.tmp, name), "--project")
            self.assertEqual(r.returncode, 0, r.stderr)
        for array in ("cls.npy", "pooled.npy", "embedding.npy"):
            self.assertEqual(read_bytes(os.path.join(self.tmp, "hf", array)), read_bytes(os.path.join(self.tmp, "converted", array)))
        r = vitreg("convert", os.path.join(FIXTURES, "torch", "evil_system.pth"), os.path.join(self.tmp, "evil.safetensors"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("refusing to unpickle posix.system", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "evil.safetensors")))

    def test_convert_int8_runs_as_model_at_int8(self):
        """docs/design.md, "Reduced precision": a quantized file gives MODEL@int8's features, byte for byte,
        says so in info, and runs at int8 of its own width only."""
        model = os.path.join(FIXTURES, "models", "hf_reg2")
        image = os.path.join(ASSETS, "chelsea.png")
        out = os.path.join(self.tmp, "int8.safetensors")
        r = vitreg("convert", model, out, "--dtype", "int8", "--int8-weights", "7")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("int8, 7-bit weights", r.stderr)
        header = read_safetensors_header(out)
        self.assertEqual(header["__metadata__"]["quantization"], "int8")
        self.assertEqual(header["blocks.0.mlp.fc1.weight"]["dtype"], "I8")
        r = vitreg("info", out)
        self.assertIn("quantized     int8, 7-bit weights", r.stdout)
        for name, m in (("source", model + "@int8"), ("file", out + "@int8")):
            r = vitreg("extract", m, image, "-o", os.path.join(self.tmp, name), "--int8-weights", "7")
            self.assertEqual(r.returncode, 0, r.stderr)
        for array in ("cls.npy", "pooled.npy", "registers.npy"):
            self.assertEqual(read_bytes(os.path.join(self.tmp, "source", array)), read_bytes(os.path.join(self.tmp, "file", array)))
        r = vitreg("extract", out, image, "-o", os.path.join(self.tmp, "fp32"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("runs only at int8", r.stderr)
        r = vitreg("convert", model, out, "--int8-weights", "7")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--int8-weights: applies to --dtype int8 only", r.stderr)

    def test_convert_int4_runs_as_model_at_int4(self):
        """docs/design.md, "Reduced precision": an int4 file gives MODEL@int4's features, byte for byte,
        says so in info, and runs at int4 only."""
        model = os.path.join(FIXTURES, "models", "hf_reg2")
        image = os.path.join(ASSETS, "chelsea.png")
        out = os.path.join(self.tmp, "int4.safetensors")
        r = vitreg("convert", model, out, "--dtype", "int4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("int4, 4-bit weights", r.stderr)
        header = read_safetensors_header(out)
        self.assertEqual(header["__metadata__"]["group_size"], "128")
        self.assertEqual(header["blocks.0.mlp.fc1.weight"]["dtype"], "U8")
        self.assertEqual(header["blocks.0.mlp.fc1.weight.zero"]["dtype"], "BF16")
        r = vitreg("info", out)
        self.assertIn("quantized     int4, 4-bit weights with a bf16 scale and zero point", r.stdout)
        for name, m in (("source", model + "@int4"), ("file", out + "@int4")):
            r = vitreg("extract", m, image, "-o", os.path.join(self.tmp, name))
            self.assertEqual(r.returncode, 0, r.stderr)
        for array in ("cls.npy", "pooled.npy", "registers.npy"):
            self.assertEqual(read_bytes(os.path.join(self.tmp, "source", array)), read_bytes(os.path.join(self.tmp, "file", array)))
        r = vitreg("extract", out + "@int8", image, "-o", os.path.join(self.tmp, "int8"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("runs only at int4", r.stderr)
        # Under a memory cap that fp32 would not fit, the precision is what is refused: no estimate
        # of a forward the file cannot run, nor a precision to try that it does not run at.
        r = vitreg("bench", out, "--iters", "1", "--warmup", "0", "--max-memory", "1M")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("runs only at int4", r.stderr)
        self.assertNotIn("would fit", r.stderr)
        # At its own precision over the cap: a smaller precision is named as a conversion of its
        # source, never as this file at a precision it does not run.
        r = vitreg("bench", out + "@int4", "--iters", "1", "--warmup", "0", "--max-memory", "1M")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("over the memory cap of 1 MB", r.stderr)
        self.assertNotIn(out + "@", r.stderr.split("By precision:")[1])

    def test_other_families_through_info_extract_maps_compare_and_dense(self):
        """docs/design.md, "Families": a CLIP tower (OpenCLIP layout) and timm models (DeiT-III; avg pool
        without a class token) through info, extract --project, maps, compare and dense."""
        clip = os.path.join(FIXTURES, "models", "open_clip_quickgelu")
        deit = os.path.join(FIXTURES, "models", "timm_deit3")
        avg = os.path.join(FIXTURES, "models", "timm_avg_fcnorm")
        image = os.path.join(ASSETS, "chelsea.png")
        r = vitreg("info", clip)
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in ["family        clip", "layout        open-clip", "mlp           quick_gelu (hidden 64)",
                     "pre_norm      yes", "biases        patch no, qkv yes", "projection    32 -> 16 (extract --project)",
                     "resize eval   open_clip: short side 32 bicubic, center crop 32 (crop_pct 1)"]:
            self.assertIn(line, r.stdout)
        r = vitreg("info", os.path.join(FIXTURES, "models", "hf_siglip_full"))
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in ["family        siglip", "layout        hf-siglip", "mlp           gelu_tanh (hidden 192)",
                     "pool          map (pooled = the attention-pool head's probe over every token)",
                     "resize eval   hf: 32x32 bicubic, no crop"]:
            self.assertIn(line, r.stdout)
        r = vitreg("info", deit)
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in ["family        timm", "class token   yes, without a position (no_embed_class)",
                     "resize eval   timm: short side 53 bicubic, center crop 48 (crop_pct 0.9)", "projection    none"]:
            self.assertIn(line, r.stdout)
        r = vitreg("info", avg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("class token   no (cls.npy holds the pooled feature)", r.stdout)
        self.assertIn("pool          avg + fc_norm", r.stdout)

        out = os.path.join(self.tmp, "clip")
        r = vitreg("extract", clip, ASSETS, "-o", out, "--project")
        self.assertEqual(r.returncode, 0, r.stderr)
        n = len(manifest(out))
        self.assertEqual(np.load(os.path.join(out, "embedding.npy")).shape, (n, 16))
        self.assertEqual(np.load(os.path.join(out, "cls.npy")).shape, (n, 32))
        self.assertEqual(read_json(os.path.join(out, "run.json"))["embedding_dim"], 16)
        r = vitreg("extract", deit, ASSETS, "-o", os.path.join(self.tmp, "deit"), "--project")
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no projection", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "deit", "run.json")))
        out = os.path.join(self.tmp, "avg")
        r = vitreg("extract", avg, image, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        np.testing.assert_array_equal(np.load(os.path.join(out, "cls.npy")), np.load(os.path.join(out, "pooled.npy")))

        for model, extra in ((clip, ["--rollout"]), (deit, ["--rollout"]), (avg, ["--query", "patch:0,1"])):
            out = os.path.join(self.tmp, "maps-" + os.path.basename(model))
            r = vitreg("maps", model, image, "-o", out, "--resize", "64x96", *extra)
            self.assertEqual(r.returncode, 0, r.stderr)
            for name in ("attention.png", "norms.png", "histogram.png", "stats.json"):
                self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        r = vitreg("maps", avg, image, "-o", os.path.join(self.tmp, "never"), "--resize", "64x96")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no class token", r.stderr)

        out = os.path.join(self.tmp, "cmp")
        r = vitreg("compare", clip, clip + "@softmax1", deit, deit + "@evict=sink", "--images", image,
                   os.path.join(ASSETS, "retina.jpg"), "-o", out, "--resize", "64x64")
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("compare.png", "stats.json", "stats.csv", "report.html"):
            self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        self.assertEqual(len(read_json(os.path.join(out, "stats.json"))["rows"]), 8)

        for model in (clip, deit):
            out = os.path.join(self.tmp, "dense-" + os.path.basename(model))
            r = vitreg("dense", model, image, "-o", out, "--resize", "64x96", "--layers", "-1", "--norm")
            self.assertEqual(r.returncode, 0, r.stderr)
            patch = 8 if model == clip else 16
            self.assertEqual(np.load(os.path.join(out, "0.npy")).shape, (96 // patch, 64 // patch, 32 if model == clip else 48))

    def test_a_names_precision_suffix_is_what_runs(self):
        # The command line once filled --precision with its default, which overrode MODEL@int8.
        image = os.path.join(ASSETS, "astronaut.jpg")
        for suffix, described in (("@int8", "int8"), ("@bf16", "bf16")):
            out = os.path.join(self.tmp, suffix[1:])
            r = vitreg("extract", MODEL + suffix, image, "-o", out, "-q")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(read_json(os.path.join(out, "run.json"))["precision"].startswith(described))
        r = vitreg("extract", MODEL + "@bf16", image, "-o", os.path.join(self.tmp, "both"), "--precision", "int8")
        self.assertEqual(r.returncode, 1)
        self.assertIn("the name asks for bf16 and --precision for int8", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "both")))

    def test_extract_npy_loads_with_numpy(self):
        out = os.path.join(self.tmp, "out")
        r = vitreg("extract", MODEL, ASSETS, "-o", out, "--patch-tokens", "--batch", "3", "--threads", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        images = sorted(f for f in os.listdir(ASSETS) if f.endswith((".jpg", ".png")))
        rows = manifest(out)
        self.assertEqual([os.path.basename(r["path"]) for r in rows], images)
        self.assertTrue(all(r["status"] == "ok" for r in rows))
        self.assertEqual([r["row"] for r in rows], list(range(len(images))))
        self.assertTrue(all(r["grid"] == [16, 16] and r["height"] == 224 for r in rows))
        cls, pooled, regs = (np.load(os.path.join(out, n)) for n in ("cls.npy", "pooled.npy", "registers.npy"))
        self.assertEqual(cls.shape, (len(images), 192))
        self.assertEqual(cls.dtype, np.float32)
        self.assertEqual(regs.shape, (len(images), 4, 192))
        patch = np.load(os.path.join(out, "patch", "0.npy"))
        self.assertEqual(patch.shape, (16, 16, 192))
        np.testing.assert_allclose(pooled[0], patch.reshape(-1, 192).mean(0), rtol=1e-5, atol=1e-5)
        # Final LayerNorm output: each token has mean ~0 over channels for a weight-1 bias-0 norm.
        self.assertLess(abs(float(cls.mean())), 0.05)
        self.assertEqual(len(os.listdir(os.path.join(out, "patch"))), len(images))
        run = read_json(os.path.join(out, "run.json"))
        self.assertEqual(run["resize"], "eval")
        # The same folder with other options is refused and left as it was; --overwrite replaces
        # it, and the numbers do not depend on the thread count.
        before = {n: read_bytes(os.path.join(out, n)) for n in ("cls.npy", "manifest.jsonl", "run.json")}
        r = vitreg("extract", MODEL, ASSETS, "-o", out, "--threads", "1")
        self.assertEqual(r.returncode, 1)
        self.assertIn(out, r.stderr)
        self.assertIn("patch_tokens: true -> false", r.stderr)
        self.assertEqual(before, {n: read_bytes(os.path.join(out, n)) for n in before})
        r = vitreg("extract", MODEL, ASSETS, "-o", out, "--threads", "1", "--overwrite", "--progress", "-q")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--progress and --quiet", r.stderr)
        r = vitreg("extract", MODEL, ASSETS, "-o", out, "--threads", "1", "--overwrite", "--progress")
        self.assertEqual(r.returncode, 0, r.stderr)
        # Into a pipe, --progress prints whole lines; the last has every stage's share.
        last = [line for line in r.stderr.splitlines() if "img/s" in line][-1]
        self.assertRegex(last, rf"\] {len(images)}/{len(images)} .* img/s  read \d+% decode \d+% forward \d+% "
                               r"\(of the wall time \d+%\)$")
        np.testing.assert_array_equal(np.load(os.path.join(out, "cls.npy")), cls)
        self.assertFalse(os.path.exists(os.path.join(out, "patch", "0.npy")))
        self.assertEqual([f for f in os.listdir(out) if ".tmp." in f], [])

    def test_bad_inputs_are_recorded_and_the_batch_goes_on(self):
        imgs = os.path.join(self.tmp, "imgs")
        os.makedirs(imgs)
        shutil.copy(os.path.join(ASSETS, "chelsea.png"), os.path.join(imgs, "a_good.png"))
        open(os.path.join(imgs, "b_zero.jpg"), "wb").close()
        with open(os.path.join(ASSETS, "coffee.jpg"), "rb") as f:
            jpg = f.read()
        with open(os.path.join(imgs, "c_truncated.jpg"), "wb") as f:
            f.write(jpg[: len(jpg) // 3])
        with open(os.path.join(imgs, "d_text.png"), "w") as f:
            f.write("hello")
        shutil.copy(os.path.join(ASSETS, "coffee.jpg"), os.path.join(imgs, "e_good.jpg"))
        listing = os.path.join(self.tmp, "list.txt")
        with open(listing, "w") as f:
            f.write("# inputs\n" + "\n".join(os.path.join(imgs, n) for n in sorted(os.listdir(imgs))) + "\n/no/such.png\n")
        out = os.path.join(self.tmp, "out")
        r = vitreg("extract", MODEL, "@" + listing, "-o", out, "--resize", "long:112")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("vitreg: 4 inputs failed", r.stderr)
        rows = manifest(out)
        self.assertEqual([x["status"] for x in rows], ["ok", "error", "error", "error", "ok", "error"])
        self.assertEqual([x.get("row") for x in rows], [0, None, None, None, 1, None])
        self.assertIn("empty file", rows[1]["error"])
        self.assertIn("truncated JPEG", rows[2]["error"])
        self.assertIn("d_text.png", rows[3]["error"])
        self.assertIn("No such file", rows[5]["error"])
        self.assertEqual(rows[0]["grid"], [5, 8])  # 451x300 → long 112 → 112x74 → 112x70
        self.assertEqual(np.load(os.path.join(out, "cls.npy")).shape, (2, 192))

    def test_safetensors_format(self):
        out = os.path.join(self.tmp, "out")
        r = vitreg("extract", MODEL, os.path.join(ASSETS, "astronaut.jpg"), "-o", out, "--format", "safetensors",
                   "--patch-tokens", "--resize", "none")
        self.assertEqual(r.returncode, 0, r.stderr)
        t = read_safetensors(os.path.join(out, "features.safetensors"))
        self.assertEqual(t["cls"].shape, (1, 192))
        self.assertEqual(t["registers"].shape, (1, 4, 192))
        p = read_safetensors(os.path.join(out, "patch", "0.safetensors"))["patch"]
        self.assertEqual(p.shape, (36, 36, 192))  # 512 px cropped to 504 = 36 patches

    def test_errors_name_the_problem(self):
        r = vitreg("info", os.path.join(self.tmp, "nope.safetensors"))
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("vitreg: "), r.stderr)
        self.assertIn("nope.safetensors", r.stderr)
        bad = os.path.join(self.tmp, "bad.safetensors")
        with open(bad, "wb") as f:
            f.write(struct.pack("<Q", 10**12) + b"{}")
        r = vitreg("extract", bad, ASSETS, "-o", os.path.join(self.tmp, "o"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad.safetensors: header claims", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "o", "cls.npy")))
        r = vitreg("extract", MODEL, ASSETS, "-o", os.path.join(self.tmp, "o"), "--resize", "huge")
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad --resize 'huge'", r.stderr)
        r = vitreg("extract", MODEL, ASSETS, "-o", os.path.join(self.tmp, "o"), "--attention", "relu")
        self.assertEqual(r.returncode, 2)
        self.assertIn("relu", r.stderr)

    def test_maps_writes_pictures_stats_and_arrays(self):
        out = os.path.join(self.tmp, "maps")
        r = vitreg("maps", MODEL, os.path.join(ASSETS, "coffee.jpg"), "-o", out, "--layers", "0,-1", "--query",
                   "patch:3,4", "--rollout", "--discard", "0.5", "--save-attention", "--save-norms", "--attention", "sink")
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ["attention.png", "norms.png", "histogram.png", "abstention.png", "rollout.png"]:
            w, h, rows = decode_png(os.path.join(out, name))
            self.assertEqual((w, h), png_size(os.path.join(out, name)))
            self.assertGreater(w, 100, name)
            self.assertGreater(h, 100, name)
            self.assertGreater(len({px for row in rows[::7] for px in row[::7]}), 50, name)  # a picture, not a blank
        w, h = png_size(os.path.join(out, "attention.png"))
        self.assertGreater(w, 4 * 224)  # 3 heads + the mean column
        self.assertGreater(h, 2 * 224)  # 2 layers
        att = np.load(os.path.join(out, "attention.npy"))
        self.assertEqual(att.shape, (2, 3, 1, 261))
        stats = read_json(os.path.join(out, "stats.json"))
        # A sink row sums to 1 - abstention: below 1, here (logit 0, 261 keys) only just.
        self.assertTrue(np.all(att.sum(-1) < 1.0))
        self.assertTrue(np.all(att.sum(-1) > 0.9))
        norms = np.load(os.path.join(out, "norms.npy"))
        self.assertEqual(norms.shape, (6, 261))
        self.assertEqual(len(stats["layers"]), 6)
        self.assertEqual(len(stats["heads"]), 18)
        last = stats["layers"][-1]
        patch_norms = norms[-1, 5:]
        self.assertAlmostEqual(last["norm_max"], float(patch_norms.max()), places=3)
        self.assertAlmostEqual(last["norm_median"], float(np.median(patch_norms)), places=3)
        self.assertEqual(stats["definitions"]["kurtosis_excess"], False)
        self.assertTrue(all(h["mean_abstention"] > 0 for h in stats["heads"]))
        self.assertEqual(stats["query"], "patch:3,4")

    def test_maps_keeps_the_aspect_of_non_square_images(self):
        out = os.path.join(self.tmp, "wide")
        r = vitreg("maps", MODEL, os.path.join(ASSETS, "coffee.jpg"), "-o", out, "--resize", "none", "--layers", "last",
                   "--heads", "max")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read_json(os.path.join(out, "stats.json"))["grid"], [24, 36])  # 512x341 → 504x336
        width, height, rows = decode_png(os.path.join(out, "attention.png"))
        # One tile (the max-fused column) among grey labels on white: its colourful pixels.
        tile = [(x, y) for y, row in enumerate(rows) for x, px in enumerate(row) if max(px) - min(px) > 30]
        xs, ys = [p[0] for p in tile], [p[1] for p in tile]
        aspect = (max(xs) - min(xs) + 1) / (max(ys) - min(ys) + 1)
        self.assertAlmostEqual(aspect, 504 / 336, delta=0.05)

    def test_maps_probe_query_of_an_attention_pool_head(self):
        # SigLIP has no class token; its MAP head's probe is the query that makes its pooled feature.
        out = os.path.join(self.tmp, "probe")
        siglip = os.path.join(FIXTURES, "models", "hf_siglip")
        r = vitreg("maps", siglip, os.path.join(ASSETS, "chelsea.png"), "-o", out, "--query", "probe", "--save-attention")
        self.assertEqual(r.returncode, 0, r.stderr)
        att = np.load(os.path.join(out, "attention.npy"))
        self.assertEqual(att.shape, (1, 3, 1, 16))  # the pool head, 3 heads, 4x4 patches at the 32 px squash
        np.testing.assert_allclose(att.sum(axis=-1), 1.0, atol=1e-5)
        self.assertEqual(read_json(os.path.join(out, "stats.json"))["query"], "probe")
        width, height, _ = decode_png(os.path.join(out, "attention.png"))
        self.assertGreater(width, height)  # one row: the heads, then their mean
        r = vitreg("maps", siglip, os.path.join(ASSETS, "chelsea.png"), "-o", os.path.join(self.tmp, "never"), "--query", "probe",
                   "--rollout")
        self.assertEqual(r.returncode, 1)
        self.assertIn("the probe query has none", r.stderr)

    def test_maps_bad_input_writes_nothing(self):
        bad = os.path.join(self.tmp, "bad.png")
        with open(bad, "w") as f:
            f.write("not an image")
        for args, message in [
            ([bad], "bad.png: not a decodable image"),
            ([os.path.join(ASSETS, "chelsea.png"), "--query", "patch:16,0"], "outside the 16x16 patch grid"),
            ([os.path.join(ASSETS, "chelsea.png"), "--query", "reg:9"], "the model has 4 registers"),
            ([os.path.join(ASSETS, "chelsea.png"), "--layers", "6"], "layer '6' in '6' is out of range"),
            ([os.path.join(ASSETS, "chelsea.png"), "--query", "head"], "bad token 'head'"),
            ([os.path.join(ASSETS, "chelsea.png"), "--query", "probe"], "attention-pool head"),
        ]:
            out = os.path.join(self.tmp, "never")
            r = vitreg("maps", MODEL, *args, "-o", out)
            self.assertEqual(r.returncode, 1, (args, r.stderr))
            self.assertIn(message, r.stderr)
            self.assertTrue(r.stderr.startswith("vitreg: "), r.stderr)
            self.assertFalse(os.path.exists(out), args)

    def test_compare_outputs_agree(self):
        out = os.path.join(self.tmp, "cmp")
        models = [MODEL, MODEL + "@softmax1", os.path.join(FIXTURES, "models", "sink_reg2_f32.safetensors")]
        r = vitreg("compare", *models, "--images", os.path.join(ASSETS, "chelsea.png"), os.path.join(ASSETS, "retina.jpg"),
                   "-o", out, "--resize", "224x224")
        self.assertEqual(r.returncode, 0, r.stderr)
        w, h = png_size(os.path.join(out, "compare.png"))
        self.assertGreater(w, 6 * 224)
        self.assertGreater(h, 2 * 224)
        import csv
        with open(os.path.join(out, "stats.csv")) as f:
            rows = list(csv.DictReader(f))
        stats = read_json(os.path.join(out, "stats.json"))
        self.assertEqual(len(rows), 6)
        self.assertEqual(len(stats["rows"]), 6)
        for c, j in zip(rows, stats["rows"]):
            for key, value in c.items():
                self.assertEqual(str(j[key]), value, key)
        # The summary, in stats.json and on the terminal: per configuration the mean and sample sd
        # over the images of each statistic after "grid" in stats.csv, the lowest mean starred.
        columns = list(rows[0])[list(rows[0]).index("grid") + 1:]
        self.assertEqual(len(columns), 16)
        summary = stats["summary"]
        self.assertEqual(set(summary["lower_is_better"]), {
            "norm_max_over_median", "artifacts_abs", "artifact_fraction_abs", "artifacts_robust", "artifact_fraction_robust",
            "artifacts_flagged", "artifact_fraction_flagged", "max_inf_norm", "kurtosis", "sink_rate", "top_key_mass"})
        # The default rule is the norm's: what it flags is what the robust rule counts.
        self.assertEqual(stats["artifact_rule"]["rule"], "norm")
        for row in rows:
            self.assertEqual(row["artifacts_flagged"], row["artifacts_robust"])
        self.assertEqual([c["config"] for c in summary["configs"]], [row["config"] for row in rows[:3]])
        printed = dict(re.findall(r"(?m)^(\w+)((?:\s+\S+ \u00b1 \S+(?: \*)?){3})\s*$", r.stdout))
        self.assertEqual(sorted(printed), sorted(columns), r.stdout)
        for k, entry in enumerate(summary["configs"]):
            self.assertIn(f"[{k + 1}] {entry['config']}", r.stdout)
            self.assertEqual(sorted(entry["columns"]), sorted(columns))
            for column in columns:
                values = [float(row[column]) for row in rows if row["config"] == entry["config"]]
                self.assertEqual(len(values), 2)
                mean = sum(values) / 2
                sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
                self.assertAlmostEqual(entry["columns"][column]["mean"], mean, delta=1e-12 * max(1, abs(mean)))
                self.assertAlmostEqual(entry["columns"][column]["sd"], sd, delta=1e-9 * max(1, abs(sd)))
                shown = float(re.findall(r"(\S+) \u00b1", printed[column])[k])
                self.assertAlmostEqual(shown, mean, delta=1e-3 * abs(mean) + 1e-12, msg=column)
        for column in summary["lower_is_better"]:
            means = [e["columns"][column]["mean"] for e in summary["configs"]]
            starred = [k for k, e in enumerate(summary["configs"]) if column in e["best"]]
            lowest = [k for k, m in enumerate(means) if m == min(means)]
            self.assertEqual(starred, [] if len(lowest) == len(means) else lowest, column)
            self.assertEqual([k for k, cell in enumerate(re.findall(r"\u00b1 \S+( \*)?", printed[column])) if cell], starred)
        self.assertEqual(rows[1]["config"], MODEL + "@softmax1 (retrofit)")
        self.assertEqual(rows[1]["retrofit"], "true")
        self.assertEqual(rows[2]["attention"], "sink")
        self.assertGreater(float(rows[2]["mean_abstention"]), 0)
        self.assertEqual(float(rows[0]["mean_abstention"]), 0)
        html = read_text(os.path.join(out, "report.html"))
        self.assertIn("data:image/png;base64,", html)
        self.assertNotIn("src=\"http", html)  # self-contained
        r = vitreg("compare", MODEL + "@relu", "--images", os.path.join(ASSETS, "chelsea.png"), "-o", out + "2")
        self.assertEqual(r.returncode, 1)
        self.assertIn("unknown suffix '@relu'", r.stderr)
        self.assertFalse(os.path.exists(out + "2"))

    def test_dense_arrays_load_with_numpy(self):
        out = os.path.join(self.tmp, "dense")
        bad = os.path.join(self.tmp, "bad.jpg")
        with open(bad, "w") as f:
            f.write("nope")
        r = vitreg("dense", MODEL, os.path.join(ASSETS, "coffee.jpg"), bad, os.path.join(ASSETS, "camera.png"), "-o", out,
                   "--resize", "long:224", "--layers", "-4,-3,-2,-1", "--norm", "--dtype", "f16", "--pca", "--pca-joint",
                   "--batch", "3")
        self.assertEqual(r.returncode, 3, r.stderr)
        rows = manifest(out)
        self.assertEqual([x["status"] for x in rows], ["ok", "error", "ok"])
        a = np.load(os.path.join(out, "0.npy"))
        self.assertEqual(a.dtype, np.float16)
        self.assertEqual(a.shape, (4, 10, 16, 192))  # 512x341 → 224x149 → 224x140: 16 x 10 patches
        self.assertEqual(rows[0]["shape"], [4, 10, 16, 192])
        g = rows[0]["geometry"]
        self.assertEqual((g["source_width"], g["source_height"], g["input_width"], g["input_height"]), (512, 341, 224, 140))
        self.assertTrue(np.all(np.isfinite(a.astype(np.float32))))
        # normed: each token has (close to) zero mean over channels for this weight-1 bias-0 norm
        self.assertLess(float(np.abs(a.astype(np.float32).mean(-1)).max()), 0.05)
        w, h = png_size(os.path.join(out, "0.pca.png"))
        self.assertEqual((w, h), (2 * 224, 140))
        self.assertEqual(np.load(os.path.join(out, "1.npy")).shape, (4, 16, 16, 192))

        out2 = os.path.join(self.tmp, "dense2")
        r = vitreg("dense", MODEL, os.path.join(ASSETS, "chelsea.png"), "-o", out2, "--resize", "none", "--layers", "0,5",
                   "--concat", "--upsample", "x2", "--format", "safetensors")
        self.assertEqual(r.returncode, 0, r.stderr)
        t = read_safetensors(os.path.join(out2, "0.safetensors"))["features"]
        self.assertEqual(t.shape, (42, 64, 384))  # 451x300 → 448x294 = 32x21 patches, x2, 2 layers concatenated
        # Another job in the folder is refused, naming what differs, and replaced only when asked.
        r = vitreg("dense", MODEL, os.path.join(ASSETS, "chelsea.png"), "-o", out2, "--upsample", "image")
        self.assertEqual(r.returncode, 1)
        self.assertIn('upsample: "x2" -> "image"', r.stderr)
        self.assertTrue(os.path.exists(os.path.join(out2, "0.safetensors")))
        r = vitreg("dense", MODEL, os.path.join(ASSETS, "chelsea.png"), "-o", out2, "--upsample", "image", "--overwrite")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(out2, "0.safetensors")))
        self.assertEqual(np.load(os.path.join(out2, "0.npy")).shape, (224, 224, 192))
        r = vitreg("dense", MODEL, os.path.join(ASSETS, "chelsea.png"), "-o", os.path.join(self.tmp, "never"), "--layers", "7")
        self.assertEqual(r.returncode, 1)
        self.assertIn("layer '7'", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never")))
        r = vitreg("dense", MODEL, os.path.join(ASSETS, "chelsea.png"), "-o", out2, "--upsample", "x0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad --upsample 'x0'", r.stderr)

    def test_dense_window_scales_and_jbu_record_the_view_and_refuse_bad_options(self):
        image = os.path.join(ASSETS, "chelsea.png")
        out = os.path.join(self.tmp, "dense-view")
        r = vitreg("dense", MODEL, image, "-o", out, "--resize", "154x126", "--window", "84", "--stride", "56",
                   "--image-scales", "0.5,1", "--flip", "--upsample", "jbu:x2", "--jbu-sigma-range", "0.2", "--dtype", "f16")
        self.assertEqual(r.returncode, 0, r.stderr)
        a = np.load(os.path.join(out, "0.npy"))
        self.assertEqual(a.shape, (18, 22, 192))  # 126x154 px = 9x11 patches, x2
        self.assertTrue(np.all(np.isfinite(a.astype(np.float32))))
        view = {"window": 84, "stride": 56, "scales": [0.5, 1.0], "flip": True, "grid": "image"}
        self.assertEqual(manifest(out)[0]["view"], view)
        with open(os.path.join(out, "job.json")) as f:
            job = json.load(f)
        with open(os.path.join(out, "run.json")) as f:
            run = json.load(f)
        for record in (job, run):
            self.assertEqual(record["view"], view)
            self.assertEqual(record["upsample"], "jbu:x2")
            self.assertEqual(record["jbu"]["sigma_range"], 0.2)
        for bad, message in (
                (["--window", "100"], "--window 100 is not a multiple of the patch size 14: use 98 or 112"),
                (["--window", "84", "--stride", "98"], "--stride 98 is larger than --window 84"),
                (["--image-scales", "1,0"], "scale 0 must be above 0"),
                (["--image-scales", "0.5,-1"], "must be above 0"),
                (["--jbu-sigma-range", "0.3"], "apply only to --upsample jbu"),
                (["--upsample", "jbu:y2"], "bad --upsample 'jbu:y2'")):
            never = os.path.join(self.tmp, "never-view")
            r = vitreg("dense", MODEL, image, "-o", never, *bad)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn(message, r.stderr)
            self.assertFalse(os.path.exists(never), bad)

    def test_dense_pca_dims_writes_the_basis_and_pca_mask_the_foreground(self):
        image = os.path.join(ASSETS, "chelsea.png")
        mask = os.path.join(self.tmp, "mask.png")  # the model input's size (154x126), left half foreground
        with open(mask, "wb") as f:
            f.write(encode_png(154, 126, bytes(255 if x < 77 else 0 for y in range(126) for x in range(154) for _ in range(3))))
        out, full = os.path.join(self.tmp, "dense-pca"), os.path.join(self.tmp, "dense-full")
        common = ["--resize", "154x126", "--layers", "-2,-1"]
        r = vitreg("dense", MODEL, image, "-o", out, *common, "--pca-dims", "8", "--pca", "foreground", "--pca-mask", mask)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = vitreg("dense", MODEL, image, "-o", full, *common, "--concat")
        self.assertEqual(r.returncode, 0, r.stderr)
        reduced, x = np.load(os.path.join(out, "0.npy")), np.load(os.path.join(full, "0.npy"))
        self.assertEqual(reduced.shape, (9, 11, 8))
        basis = read_safetensors(os.path.join(out, "0.pca_basis.safetensors"))
        self.assertEqual(basis["components"].shape, (8, 384))
        # The basis applies the reduction: (x - mean) @ components.T is the written array.
        again = (x.reshape(-1, 384).astype(np.float64) - basis["mean"]) @ basis["components"].T.astype(np.float64)
        self.assertLess(np.abs(again - reduced.reshape(-1, 8)).max(), 1e-4 * np.abs(reduced).max())
        self.assertTrue(np.all(np.diff(basis["explained_variance"]) <= 0))
        self.assertEqual(manifest(out)[0]["pca_basis"], "0.pca_basis.safetensors")
        for record in ("job.json", "run.json"):
            with open(os.path.join(out, record)) as f:
                j = json.load(f)
            self.assertEqual(j["pca_dims"], {"k": 8, "fit": "per image"})
            self.assertEqual(j["pca_mask"], mask)
        width, height, rows = decode_png(os.path.join(out, "0.pca.png"))
        self.assertEqual((width, height), (2 * 154, 126))
        self.assertLessEqual(max(max(p) for row in rows for p in row[154 + 100:]), 52)  # outside the mask: dimmed
        for bad, message in (
                (["--pca-dims", "385"], "--pca-dims 385 must be in 1..384"),
                (["--pca-dims", "-1"], "must be in 1..384"),
                (["--pca-mask", mask], "add --pca foreground"),
                (["--pca", "foreground", "--pca-mask", os.path.join(self.tmp, "nothing.png")], "no such file or folder")):
            never = os.path.join(self.tmp, "never-pca")
            r = vitreg("dense", MODEL, image, "-o", never, *common, *bad)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn(message, r.stderr)
            self.assertFalse(os.path.exists(never), bad)

    def test_linprobe_reports_miou(self):
        r = vitreg("linprobe", MODEL, "--data", os.path.join(FIXTURES, "dense"), "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["train_images"], j["test_images"]), (30, 10))
        self.assertEqual(len(j["iou"]), 4)
        self.assertTrue(0 <= j["miou"] <= 1)
        self.assertGreater(j["accuracy"], 0.5)  # background alone is most of the patches

    def test_bench_reports_ms_and_gflops(self):
        r = vitreg("bench", MODEL, "--iters", "2", "--warmup", "1", "--size", "112x168")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"vitreg 112x168 batch=1 threads=all precision=fp32: [0-9.]+ ms/image median, [0-9.]+ p95, [0-9.]+ GFLOP/s")


    def test_bench_peak_states_fractions_of_the_measured_peak(self):
        r = vitreg("bench", MODEL, "--iters", "1", "--warmup", "0", "--threads", "1", "--peak")
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"^peak per core: fp32 FMA ([0-9.]+) GFLOP/s \(256-bit\)", r.stdout, re.M)
        self.assertIsNotNone(m, r.stdout)
        cpu_flags = set(open("/proc/cpuinfo").read().split())
        int16 = re.search(r"^peak per core: .*; int16 ([0-9.]+) GOP/s \(vpdpwssd \((512|256)-bit\)\)", r.stdout, re.M)
        self.assertEqual(int16 is not None, bool({"avx512_vnni", "avx_vnni"} & cpu_flags), r.stdout)
        if "avx2" in open("/proc/cpuinfo").read():
            self.assertGreater(float(m.group(1)), 1.0)
            lin = re.search(r"^linear layers, fp32, 1 thread, 261 rows \(kernels [^)]*\): qkv ([0-9.]+) GFLOP/s "
                            r"\(([0-9]+)%\).*all four ([0-9.]+) GFLOP/s = ([0-9]+)% of the peak", r.stdout, re.M)
            self.assertIsNotNone(lin, r.stdout)
            self.assertGreater(float(lin.group(3)), 0.0)
            self.assertRegex(r.stdout, r"(?m)^forward: [0-9]+% of 1 × the per-core peak")
        # A reduced-precision run times its own linears, against its instruction's peak where the CPU
        # has a dot-product instruction (the tiles', vpdpbusd's), and states the whole forward against
        # that instruction's peak (emulated: against none).
        with open("/proc/cpuinfo") as f:
            flags = f.read()
        r = vitreg("bench", MODEL, "--iters", "1", "--warmup", "0", "--threads", "1", "--peak", "--precision", "int8")
        self.assertEqual(r.returncode, 0, r.stderr)
        if "avx2" in flags:
            lin = re.search(r"^linear layers, int8, 1 thread, 261 rows \(kernels .*\): qkv ([0-9.]+) GOP/s.*all four ([0-9.]+) GOP/s",
                            r.stdout, re.M)
            self.assertIsNotNone(lin, r.stdout)
            self.assertGreater(float(lin.group(2)), 0.0)
            if "avx512_vnni" in flags or "amx_int8" in flags:
                self.assertRegex(r.stdout, r"(?m)^linear layers, int8.* = [0-9]+% of its instruction's peak")
            if "avx512_vnni" in flags or "amx_int8" in flags:
                self.assertRegex(r.stdout, r"(?m)^forward: [0-9]+% of 1 × the per-core peak of its linears' "
                                           r"instruction, (avx512-vnni|amx-int8)")
            elif "avx_vnni" not in flags:
                self.assertRegex(r.stdout, r"(?m)^forward: int8 per-token emulated, not a fraction of a peak")
        # The profile: every stage's share and ms per image, the linears among them.
        m = re.search(r"^  profile: .*qkv ([0-9]+)% \(([0-9.]+) ms\).*fc2 ([0-9]+)% .* per image$", r.stdout, re.M)
        self.assertIsNotNone(m, r.stdout)
        self.assertGreater(float(m.group(2)), 0.0)

    def test_bench_shows_the_error_next_to_the_speed(self):
        for precision in ("bf16", "int8"):
            r = vitreg("bench", MODEL, "--iters", "1", "--warmup", "0", "--precision", precision,
                       "--images", ASSETS)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"precision={precision}", r.stdout)
            m = re.search(r"CLS cosine ([0-9.]+) \(min over the batch\), patch cosine ([0-9.]+) mean", r.stdout)
            self.assertIsNotNone(m, r.stdout)
            self.assertGreater(float(m.group(1)), 0.99)
            self.assertLessEqual(float(m.group(1)), 1.0)

    def test_int8_weight_bits_are_part_of_the_run_and_forced_kernels_are_checked(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            r = vitreg("extract", MODEL, ASSETS, "-o", out, "--precision", "int8", "--int8-weights", "7")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(read_json(os.path.join(out, "run.json"))["precision"], "int8 per-token, 7-bit weights")
            r = vitreg("extract", MODEL, ASSETS, "-o", out, "--resume", "--precision", "int8")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn('"int8 per-token, 7-bit weights" -> "int8 per-token"', r.stderr)
            r = vitreg("bench", MODEL, "--iters", "1", "--warmup", "0", "--int8-weights", "6")
            self.assertEqual(r.returncode, 2)
        env = dict(os.environ)
        for var, value, message in (("VITREG_ISA", "avx9", "VITREG_ISA='avx9' is not a kernel set"),
                                    ("VITREG_INT8_ISA", "sse", "VITREG_INT8_ISA='sse' is not an int8 kernel"),
                                    ("VITREG_BF16_ISA", "tiles", "VITREG_BF16_ISA='tiles' is not a bf16 kernel")):
            r = subprocess.run([VITREG, "bench", MODEL, "--iters", "1", "--warmup", "0", "--precision", "int8"],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600,
                               env=dict(env, **{var: value}))
            self.assertEqual(r.returncode, 1, var)
            self.assertIn(message, r.stderr)
        r = subprocess.run([VITREG, "bench", MODEL, "--iters", "1", "--warmup", "0", "--precision", "int8"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600,
                           env=dict(env, VITREG_INT8_ISA="avx2-maddubs"))
        if "avx2" in open("/proc/cpuinfo").read():
            self.assertEqual(r.returncode, 1)
            self.assertIn("needs --int8-weights 7", r.stderr)

    def test_int8_per_tensor_runs_from_its_calibration_and_resume_keeps_the_precision(self):
        with tempfile.TemporaryDirectory() as tmp:
            scales = os.path.join(tmp, "scales.json")
            r = vitreg("calibrate-int8", MODEL, "--images", ASSETS, "-o", scales, "--percentile", "99.9")
            self.assertEqual(r.returncode, 0, r.stderr)
            cal = json.load(open(scales))
            self.assertEqual(cal["method"], "percentile")
            self.assertEqual(len(cal["images"]), len([f for f in os.listdir(ASSETS) if not f.endswith(".md")]))
            self.assertIn("blocks.0.attn.qkv", cal["ranges"])
            out = os.path.join(tmp, "out")
            args = ("extract", MODEL, ASSETS, "-o", out, "--precision", "int8", "--act-quant", "per-tensor",
                    "--scales", scales)
            r = vitreg(*args)
            self.assertEqual(r.returncode, 0, r.stderr)
            run = json.load(open(os.path.join(out, "run.json")))
            self.assertEqual(run["precision"], f"int8 per-tensor ({scales})")
            rows = [json.loads(line) for line in open(os.path.join(out, "manifest.jsonl"))]
            self.assertTrue(all(row["precision"] == run["precision"] for row in rows))
            # A resumed run with another precision is refused, naming the difference.
            r = vitreg("extract", MODEL, ASSETS, "-o", out, "--resume", "--precision", "bf16")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn('precision: "int8 per-tensor', r.stderr)
            self.assertIn('-> "bf16"', r.stderr)
            # Contradictions and a malformed file: clear errors, nothing written.
            r = vitreg("extract", MODEL, ASSETS, "-o", os.path.join(tmp, "x"), "--act-quant", "per-tensor")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("--act-quant per-tensor applies to --precision int8 only", r.stderr)
            bad = os.path.join(tmp, "bad.json")
            open(bad, "w").write('{"format": "vitreg-int8-calibration", "version": 1, "ranges": {')
            r = vitreg("extract", MODEL, ASSETS, "-o", os.path.join(tmp, "y"), "--precision", "int8",
                       "--act-quant", "per-tensor", "--scales", bad)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(bad + ": not a vitreg int8 calibration: malformed JSON", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "y")))
            # compare puts one checkpoint at several precisions side by side.
            cmp_out = os.path.join(tmp, "cmp")
            r = vitreg("compare", MODEL, MODEL + "@int8", MODEL + "@int8=" + scales, "--images",
                       os.path.join(ASSETS, "camera.png"), "-o", cmp_out)
            self.assertEqual(r.returncode, 0, r.stderr)
            stats = list(csv.DictReader(open(os.path.join(cmp_out, "stats.csv"))))
            self.assertEqual([row["precision"] for row in stats],
                             ["fp32", "int8 per-token", f"int8 per-tensor ({scales})"])

    def test_interventions_evict_calibrate_and_test_time_registers(self):
        planted = os.path.join(FIXTURES, "models", "planted_f32.safetensors")
        plain = os.path.join(FIXTURES, "models", "dinov2_f32.safetensors")
        images = write_grey_images(os.path.join(self.tmp, "grey"), seed=0)
        small = ("--resize", "16x16")

        # find-register-neurons finds the planted neuron; --ttr moves the outliers off the patches.
        neurons = os.path.join(self.tmp, "neurons.json")
        r = vitreg("find-register-neurons", planted, "--images", images, "-o", neurons, *small)
        self.assertEqual(r.returncode, 0, r.stderr)
        found = read_json(neurons)
        self.assertEqual(found["format"], "vitreg-register-neurons")
        self.assertEqual((found["ranked"][0]["layer"], found["ranked"][0]["neuron"]), (1, 21))
        self.assertEqual(found["selected"], [[1, 21]])
        self.assertEqual(len(found["images_with_outliers"]), 3)
        for ttr in ("", neurons):
            out = os.path.join(self.tmp, "extract" + ("-ttr" if ttr else ""))
            extra = ("--ttr", "1", "--register-neurons", ttr) if ttr else ()
            r = vitreg("extract", planted, images, "-o", out, *small, *extra)
            self.assertEqual(r.returncode, 0, r.stderr)
            run = read_json(os.path.join(out, "run.json"))
            if ttr:
                self.assertEqual(run["test_time_registers"], 1)
                self.assertEqual(run["trained_registers"], 0)
                self.assertEqual(run["intervention"], "ttr=1 neurons=1:21")
                self.assertEqual(np.load(os.path.join(out, "registers.npy")).shape, (3, 1, 64))
            else:
                self.assertFalse(os.path.exists(os.path.join(out, "registers.npy")))
        m = os.path.join(self.tmp, "maps")
        r = vitreg("maps", planted, os.path.join(images, "grey0.png"), "-o", m, *small, "--ttr", "1",
                   "--register-neurons", "1:21", "--query", "reg:0")
        self.assertEqual(r.returncode, 0, r.stderr)
        stats = read_json(os.path.join(m, "stats.json"))
        self.assertEqual(stats["test_time_registers"], 1)
        self.assertEqual(stats["layers"][-1]["artifacts_abs"], 0)

        # compare: the plain model beside its interventions, one column each.
        cmp_out = os.path.join(self.tmp, "cmp")
        r = vitreg("compare", planted, planted + "@ttr=1:" + neurons, planted + "@evict=artifacts",
                   "--images", os.path.join(images, "grey0.png"), "-o", cmp_out, *small)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = list(csv.DictReader(open(os.path.join(cmp_out, "stats.csv"))))
        self.assertEqual([row["intervention"] for row in rows], ["none", "ttr=1 neurons=1:21", "evict=artifacts"])
        self.assertEqual([row["artifacts_abs"] for row in rows][:2], ["3", "0"])

        # calibrate-sink writes a sink checkpoint that records how it was made and runs.
        for evict in (False, True):
            out = os.path.join(self.tmp, "sink%s.safetensors" % ("-evicted" if evict else ""))
            r = vitreg("calibrate-sink", plain, "--images", images, "-o", out, *small,
                       *(["--evict-sink"] if evict else []))
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, "rb") as f:
                meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
            self.assertEqual(meta["attention"], "sink")
            self.assertRegex(meta["source_digest"], r"^fnv1a64:[0-9a-f]{16}$")
            self.assertEqual(len(json.loads(meta["calibration_images"])), 3)
            self.assertEqual(meta.get("evict"), "sink" if evict else None)
            self.assertEqual(read_safetensors(out)["blocks.1.attn.sinks"].shape, (4,))
            r = vitreg("info", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"(?m)^attention\s+sink$")
            self.assertRegex(r.stdout, r"(?m)^pos_interp\s+offset$")  # the source's resampling, kept
            if evict:
                self.assertIn("evicts each head's sink key", r.stderr)

        # Bad intervention arguments: a message naming the fault, nothing written.
        for args, message in ((("--evict", "sinks"), "unknown entry 'sinks'"),
                              (("--ttr", "1"), "--ttr needs --register-neurons"),
                              (("--ttr", "1", "--register-neurons", "9:0"), "outside the model"),
                              (("--ttr", "1", "--register-neurons", os.path.join(images, "grey0.png") + ".json"),
                               "cannot read the register-neuron file")):
            out = os.path.join(self.tmp, "bad")
            r = vitreg("extract", planted, images, "-o", out, *small, *args)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(message, r.stderr)
            self.assertFalse(os.path.exists(out))

    def test_defects_and_the_direction_rule_on_the_planted_model(self):
        planted = os.path.join(FIXTURES, "defects", "planted_direction_f16.safetensors")
        expected = read_safetensors(os.path.join(FIXTURES, "defects", "planted_direction.safetensors"))
        v = expected["direction"]
        r = vitreg("defects", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("16384", r.stdout)  # the sample's size is stated
        out = os.path.join(self.tmp, "defects")
        r = vitreg("defects", planted, "-o", out, "--samples", "2048", "--seed", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2048-sample least-squares fit, seed 3", r.stderr)
        got = read_safetensors(os.path.join(out, "defects.safetensors"))
        self.assertEqual(got["directions"].shape, (4, 64))
        for u in got["directions"]:
            self.assertGreaterEqual(abs(float(u @ v)), 0.99)
        info = read_json(os.path.join(out, "defects.json"))
        self.assertEqual(info["samples"], 2048)
        self.assertEqual(len(info["layers"]), 4)
        np.testing.assert_allclose(info["layers"][3]["singular_values"], got["singular_values"][3], rtol=1e-6)

        # The rule from the file or computed on the fly; `both` flags what both tests flag.
        image = os.path.join(self.tmp, "ramp.png")
        ramp = np.fromfunction(lambda y, x, c: 8 * (x + y) + 40 * c, (16, 16, 3)).astype(np.uint8)
        with open(image, "wb") as f:
            f.write(encode_png(16, 16, ramp.tobytes()))
        flagged = {}
        for rule, extra in (("direction", ("--defects", out)), ("direction", ()), ("both", ())):
            maps = os.path.join(self.tmp, "maps-" + rule + str(len(extra)))
            r = vitreg("maps", planted, image, "-o", maps, "--resize", "none", "--artifact-rule", rule, *extra)
            self.assertEqual(r.returncode, 0, r.stderr)
            stats = read_json(os.path.join(maps, "stats.json"))
            self.assertEqual(stats["artifact_rule"]["rule"], rule)
            self.assertEqual(stats["artifact_rule"]["directions"], extra[1] if extra else "computed from the model's weights")
            flagged[rule] = [sorted(map(tuple, layer["artifact_positions_flagged"])) for layer in stats["layers"]]
            robust = [sorted(map(tuple, layer["artifact_positions_robust"])) for layer in stats["layers"]]
        for layer, cells in enumerate(flagged["both"]):
            self.assertEqual(cells, sorted(set(flagged["direction"][layer]) & set(robust[layer])))

        # Directions of another model are refused by name, and nothing is written.
        other = os.path.join(self.tmp, "other")
        self.assertEqual(vitreg("defects", os.path.join(FIXTURES, "models", "dinov2_f32.safetensors"), "-o", other,
                                "--samples", "256").returncode, 0)
        bad = os.path.join(self.tmp, "bad")
        r = vitreg("maps", planted, image, "-o", bad, "--resize", "none", "--artifact-rule", "direction", "--defects", other)
        self.assertEqual(r.returncode, 1)
        self.assertIn(other, r.stderr)
        self.assertIn("2 layers of width 64, the model has 4", r.stderr)
        self.assertFalse(os.path.exists(bad))
        r = vitreg("maps", planted, image, "-o", bad, "--artifact-rule", "angle")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--artifact-rule", r.stderr)
        r = vitreg("compare", planted, "--images", image, "-o", bad, "--artifact-rule", "direction", "--defects", image)
        self.assertEqual(r.returncode, 1)
        self.assertIn(image, r.stderr)
        self.assertFalse(os.path.exists(bad))

    def test_the_direction_rule_against_the_norm_rules_misfire_on_garments(self):
        """tests/fixtures/make_defects.py's planted-canvas model on its fashion-canvas-like images:
        compare's counts and cells per rule. norm flags the garments too, direction and both exactly
        the planted cells."""
        info = read_json(os.path.join(FIXTURES, "defects", "canvases.json"))
        model = os.path.join(FIXTURES, info["model"])
        names = sorted(info["images"])
        images = [os.path.join(FIXTURES, "defects", "canvases", n + ".png") for n in names]
        planted = sorted(map(tuple, info["planted"]))
        for rule in ("norm", "direction", "both"):
            out = os.path.join(self.tmp, "canvas-" + rule)
            r = vitreg("compare", model, "--images", *images, "--resize", "none", "--artifact-rule", rule, "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            stats = read_json(os.path.join(out, "stats.json"))
            self.assertEqual(stats["artifact_rule"]["rule"], rule)
            with open(os.path.join(out, "stats.csv")) as f:
                counts = [int(row["artifacts_flagged"]) for row in csv.DictReader(f)]
            for name, row, count in zip(names, stats["rows"], counts):
                self.assertEqual(row["per_layer"]["grid"], [8, 8])
                cells = sorted(map(tuple, row["per_layer"]["layers"][-1]["artifact_positions_flagged"]))
                garment = sorted(map(tuple, info["images"][name]["garment"]))
                expected = sorted(set(planted) | set(garment)) if rule == "norm" else planted
                self.assertEqual(cells, expected, (rule, name))
                self.assertEqual(count, len(expected), (rule, name))

        # dense writes the rule's mask beside the features: [layers, h, w], 1 on the flagged patches.
        for rule in ("norm", "direction"):
            out = os.path.join(self.tmp, "dense-" + rule)
            r = vitreg("dense", model, *images, "-o", out, "--resize", "none", "--artifact-rule", rule)
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = manifest(out)
            self.assertEqual(len(rows), 3)
            for row in rows:
                self.assertIn("{row}.artifacts.npy", read_json(os.path.join(out, "run.json"))["row_files"])
                name = os.path.basename(row["path"])[:-len(".png")]
                mask = np.load(os.path.join(out, row["file"][:-len(".npy")] + ".artifacts.npy"))
                self.assertEqual(mask.shape, (1, 8, 8))
                self.assertEqual(mask.dtype, np.float32)
                cells = sorted(map(tuple, np.argwhere(mask[0] == 1).tolist()))
                garment = sorted(map(tuple, info["images"][name]["garment"]))
                self.assertEqual(cells, sorted(set(planted) | set(garment)) if rule == "norm" else planted, (rule, name))
            self.assertEqual(read_json(os.path.join(out, "run.json"))["artifact_rule"]["rule"], rule)
        r = vitreg("dense", model, images[0], "-o", os.path.join(self.tmp, "dense-bad"), "--resize", "none",
                   "--artifact-rule", "both", "--window", "16")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--artifact-rule", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "dense-bad")))

    def test_repairs_calibrate_bias_and_suffixes(self):
        planted = os.path.join(FIXTURES, "models", "planted_f32.safetensors")
        images = write_grey_images(os.path.join(self.tmp, "grey"), seed=1)
        small = ("--resize", "16x16")

        # calibrate-bias: the per-position mean after the last block, over the folder or blank images.
        bias = os.path.join(self.tmp, "bias.safetensors")
        r = vitreg("calibrate-bias", planted, "--images", images, "-o", bias, *small)
        self.assertEqual(r.returncode, 0, r.stderr)
        meta = read_safetensors_header(bias)["__metadata__"]
        self.assertEqual((meta["format"], meta["layer"], meta["registers"]), ("vitreg-repair-calibration", "3", "0"))
        self.assertEqual(len(json.loads(meta["images"])), 3)
        self.assertEqual(read_safetensors(bias)["bias"].shape, (16, 64))
        blank = os.path.join(self.tmp, "blank.safetensors")
        r = vitreg("calibrate-bias", planted, "--blank", "2", "-o", blank, "--layer", "-2")
        self.assertEqual(r.returncode, 0, r.stderr)
        meta = read_safetensors_header(blank)["__metadata__"]
        self.assertEqual((meta["layer"], json.loads(meta["images"])), ("2", ["blank:0.000000", "blank:1.000000"]))

        # compare: the repairs beside the plain model; the rule no longer flags the planted patches.
        cmp_out = os.path.join(self.tmp, "cmp")
        configs = [planted, planted + "@debias=" + bias, planted + "@inpaint=artifacts",
                   planted + "@debias=" + bias + "@inpaint=artifacts", planted + "@denoise=shift:4"]
        r = vitreg("compare", *configs, "--images", os.path.join(images, "grey0.png"), "-o", cmp_out, *small)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = list(csv.DictReader(open(os.path.join(cmp_out, "stats.csv"))))
        self.assertEqual([row["intervention"] for row in rows],
                         ["none", "repair=debias=" + bias, "repair=inpaint=artifacts",
                          "repair=debias=" + bias + "@inpaint=artifacts",
                          "repair=denoise=shift:4 shifts=0:0,0:1,1:0,-1:-1"])
        self.assertEqual([row["artifacts_abs"] for row in rows], ["3", "0", "0", "0", "0"])

        # extract takes the suffixes on its MODEL and records them.
        out = os.path.join(self.tmp, "extract")
        r = vitreg("extract", planted + "@denoise=shift:4:median", images, "-o", out, *small)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read_json(os.path.join(out, "run.json"))["intervention"], "repair=denoise=shift:4:median shifts=0:0,0:1,1:0,-1:-1")

        # Bad repairs: a message naming the suffix and the fault, nothing written.
        missing = os.path.join(self.tmp, "missing.safetensors")
        for suffix, message in (("@registers=zero", "@registers=zero: the model has no register tokens"),
                                ("@denoise=shift:1", "expected @denoise=shift:K"),
                                ("@inpaint=all", "expected @inpaint=artifacts[:LAYERS]"),
                                ("@inpaint=artifacts:9", "layer '9'"),
                                ("@debias=" + missing, missing + ": not a repair calibration"),
                                ("@debias=" + planted, "no 'format' in its metadata")):
            bad = os.path.join(self.tmp, "bad")
            r = vitreg("extract", planted + suffix, images, "-o", bad, *small)
            self.assertNotEqual(r.returncode, 0, suffix)
            self.assertIn(message, r.stderr)
            self.assertFalse(os.path.exists(bad))
        r = vitreg("calibrate-bias", planted, "-o", os.path.join(self.tmp, "none.safetensors"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("give either --images or --blank N", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "none.safetensors")))

if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
