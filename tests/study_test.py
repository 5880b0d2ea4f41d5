#!/usr/bin/env python3
"""`vitreg study` end to end: the trained family on held-out images (study.json and study.csv
agree, accuracies match the PyTorch predictions in tests/fixtures/heldout/expected.json, the
shapes and applicable sections per configuration), study.html in headless Chromium (no console
error, every figure in the DOM; report_test.py shows the console check can fail), and refusals (bad
configuration, image, size or labels) that write nothing.

usage: study_test.py VITREG_BINARY REPO_ROOT
"""
import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from chromium_util import CHROMIUM, chromium, console_errors
from png_util import decode_png

VITREG, ROOT = sys.argv[1], sys.argv[2]
WEIGHTS = os.path.join(ROOT, "weights")
HELDOUT = os.path.join(ROOT, "tests", "fixtures", "heldout")
IMAGES = [os.path.join(HELDOUT, f"heldout_{i:03d}.png") for i in range(8)]
SOFTMAX = os.path.join(WEIGHTS, "vitreg-fmnist-softmax.safetensors")
SINK = os.path.join(WEIGHTS, "vitreg-fmnist-sink.safetensors")
SOFTMAX1_REG4 = os.path.join(WEIGHTS, "vitreg-fmnist-softmax1-reg4.safetensors")


def stem(path):
    return os.path.basename(path)[: -len(".safetensors")]


def vitreg(*args):
    return subprocess.run([VITREG, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def same(a, b):
    """A CSV cell against the JSON value it prints."""
    if b is None:
        return a == ""
    if isinstance(b, bool) or isinstance(b, str):
        return a == str(b)
    return math.isclose(float(a), float(b), rel_tol=1e-7, abs_tol=1e-12)


class Study(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-study-")
        cls.out = os.path.join(cls.tmp, "study")
        r = vitreg("study", SOFTMAX, SINK, SOFTMAX1_REG4, f"{SOFTMAX}@int8", "--images", *IMAGES, "--resize", "none",
                   "--sizes", "112,224", "--labels", os.path.join(HELDOUT, "labels.json"), "--timing-images", "2",
                   "--defect-samples", "2048", "-o", cls.out)
        assert r.returncode == 0, r.stderr
        cls.stdout = r.stdout
        cls.study = read_json(os.path.join(cls.out, "study.json"))
        cls.configs = {c["name"]: c for c in cls.study["configs"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_csv_and_json_agree(self):
        with open(os.path.join(self.out, "study.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), len(self.study["configs"]))
        for row, config in zip(rows, self.study["configs"]):
            self.assertEqual(set(row), set(config["summary"]))
            for key, cell in row.items():
                self.assertTrue(same(cell, config["summary"][key]), (config["name"], key, cell, config["summary"][key]))

    def test_summary_is_derived_from_the_details(self):
        for c in self.study["configs"]:
            s = c["summary"]
            heads = [h for row in c["heads"] for h in row]
            self.assertAlmostEqual(s["heads_dump"], sum(h["class"] == "dump" for h in heads) / len(heads))
            means = [v for row in c["weights_sum"] for v in row]
            self.assertAlmostEqual(s["weights_sum_mean"], sum(means) / len(means))
            self.assertEqual(s["massive_ratio"], max(layer["ratio"] for layer in c["massive"]))
            self.assertEqual(s["int8_per_token_cls_cosine"], c["int8"]["per_token"]["cls_cosine"])
            self.assertEqual(s["evict_sink_cls_cosine"], c["eviction"]["sink"]["cls_cosine"])

    def test_shapes_and_the_sections_that_apply(self):
        self.assertEqual(self.study["calibration_images"], [0, 2, 4, 6])
        self.assertEqual(self.study["evaluation_images"], [1, 3, 5, 7])
        softmax, sink, s1reg = (self.configs[stem(p)] for p in (SOFTMAX, SINK, SOFTMAX1_REG4))
        for c in (softmax, sink, s1reg):
            self.assertEqual(len(c["heads"]), 6)
            self.assertEqual(len(c["heads"][0]), 2)
            self.assertEqual([m["tokens"] for m in c["mass_vs_tokens"]], [65 + c["registers"], 257 + c["registers"]])
            for layer in c["massive"]:
                values = [t[0] for t in layer["top"]]
                self.assertEqual(values, sorted(values, reverse=True))
                self.assertGreater(layer["ratio"], 1)
        # softmax: every row sums to 1, nothing abstains, retrofits apply, no abstaining query
        self.assertEqual(softmax["weights_sum_range"], [[1, 1]] * 6)
        self.assertIsNotNone(softmax["retrofit"]["calibrated_sink"])
        self.assertEqual(len(softmax["retrofit"]["calibrated_sink"]["sinks"]), 6)
        self.assertIsNone(softmax["abstaining_query"])
        self.assertIsNone(softmax["summary"]["mass_drift"])
        self.assertNotIn("registers", softmax["eviction"])
        # sink: 12 logits added, rows sum below 1, its null slot is the abstention
        self.assertEqual(sink["cost"]["parameters_added"], 12)
        self.assertIsNone(sink["retrofit"])
        q = sink["abstaining_query"]
        self.assertEqual(len(q["keys"]), 6)
        self.assertAlmostEqual(q["abstention"] + sum(k["weight"] for k in q["keys"]) + q["rest"], 1, places=6)
        self.assertAlmostEqual(sum(k["softmax_weight"] for k in q["keys"]) + q["softmax_rest"], 1, places=6)
        self.assertGreaterEqual(q["abstention"], max(1 - r[0] for r in sink["weights_sum_range"]) - 1e-6)
        # softmax-1 with 4 registers: 4 x 128 parameters, register eviction measured
        self.assertEqual(s1reg["cost"]["parameters_added"], 512)
        self.assertIn("registers", s1reg["eviction"])
        self.assertIn("int8 per-token", self.configs["vitreg-fmnist-softmax@int8"]["precision"])
        # the defect fit the options asked for, of the file's weights whatever the precision runs
        for c in self.configs.values():
            self.assertTrue(c["defects"]["fit"].startswith("2048-sample"), c["defects"]["fit"])
        self.assertEqual(softmax["defects"]["singular_value"],
                         self.configs["vitreg-fmnist-softmax@int8"]["defects"]["singular_value"])

    def test_accuracy_matches_the_pytorch_predictions(self):
        labels = read_json(os.path.join(HELDOUT, "labels.json"))
        expected = read_json(os.path.join(HELDOUT, "expected.json"))["checkpoints"]
        evaluation = [os.path.basename(IMAGES[i]) for i in self.study["evaluation_images"]]
        for path in (SOFTMAX, SINK):
            predictions = expected["weights/" + os.path.basename(path)]["predictions"]
            right = sum(predictions[f] == "".join(map(str, labels[f])) for f in evaluation)
            c = self.configs[stem(path)]
            self.assertEqual(c["int8"]["fp32_accuracy"], right / len(evaluation), path)
        retro = self.configs[stem(SOFTMAX)]["retrofit"]["softmax1"]
        self.assertAlmostEqual(retro["accuracy_change"], retro["accuracy"] - self.configs[stem(SOFTMAX)]["int8"]["fp32_accuracy"])

    def test_the_table_prints_on_the_terminal(self):
        lines = self.stdout.strip().splitlines()
        self.assertEqual(len(lines), 1 + len(self.study["configs"]))
        self.assertIn("vitreg-fmnist-sink", lines[2])

    @unittest.skipIf(CHROMIUM is None, "chromium is not installed: run scripts/setup.sh --tests")
    def test_report_renders_in_chromium(self):
        html = os.path.join(self.out, "study.html")
        r = chromium(self.tmp, "--dump-dom", "file://" + html)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(console_errors(r.stderr), [])
        dom = r.stdout
        figures = int(dom.split('data-figures="', 1)[1].split('"', 1)[0])
        self.assertGreaterEqual(figures, 9)
        self.assertEqual(len(re.findall(r'<svg class="[^"]*\bfigure\b', dom)), figures)
        first_table = dom.index("<table")
        for prop in ("How heads do nothing", "Weights sum to", "Added cost", "Massive activations", "INT8",
                     "Window safety", "Retrofit", "number of keys", "null slot"):
            self.assertLess(first_table, dom.index(prop), prop)
        shot = os.path.join(self.tmp, "study.png")
        r = chromium(self.tmp, "--screenshot=" + shot, "--window-size=1400,900", "file://" + html)
        width, height, rows = decode_png(shot)
        self.assertEqual((width, height), (1400, 900))
        self.assertGreater(len({px for row in rows[::10] for px in row[::10]}), 8, "the first screen is not blank")


class OtherFamilies(unittest.TestCase):
    def test_timm_without_class_token_clip_folder_and_pytorch_file(self):
        fixtures = os.path.join(ROOT, "tests", "fixtures")
        with tempfile.TemporaryDirectory() as tmp:
            r = vitreg("study", os.path.join(fixtures, "models", "timm_avg_fcnorm"), os.path.join(fixtures, "models", "hf_clip"),
                       os.path.join(fixtures, "torch", "teacher_module.pth"), "--images", *IMAGES[:2], "--resize", "64x64",
                       "--timing-images", "1", "-o", tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            avg, clip, pth = read_json(os.path.join(tmp, "study.json"))["configs"]
        # no class token: no head can dump on one, and the tokens are registers + patches only
        self.assertEqual(avg["tokens"], 4)
        self.assertFalse(any(h["key_kind"] == "cls" for row in avg["heads"] for h in row))
        self.assertEqual(clip["attention"], "softmax")
        self.assertEqual(pth["name"], "teacher_module.pth")
        self.assertIsNotNone(pth["retrofit"]["calibrated_sink"])


class Refusals(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vitreg-study-bad-")
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def refused(self, args, *needles):
        r = vitreg("study", *args, "-o", self.out)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        for needle in needles:
            self.assertIn(needle, r.stderr)
        self.assertFalse(os.path.exists(self.out), "a refused study must write nothing")

    def test_bad_configuration(self):
        self.refused([os.path.join(self.tmp, "missing.safetensors"), "--images", IMAGES[0]], "missing.safetensors")
        self.refused([f"{SOFTMAX}@softmax1@sink", "--images", IMAGES[0]], "two attention kinds")
        self.refused([f"{SOFTMAX}@ttr=1:9:0", "--images", IMAGES[0]], "9")

    def test_bad_image(self):
        corrupt = os.path.join(self.tmp, "corrupt.png")
        with open(IMAGES[0], "rb") as f:
            data = f.read()
        with open(corrupt, "wb") as f:
            f.write(data[: len(data) // 3])
        self.refused([SOFTMAX, "--images", IMAGES[0], corrupt, "--resize", "none"], "corrupt.png")

    def test_bad_size(self):
        self.refused([SOFTMAX, "--images", IMAGES[0], "--sizes", "112,100"], "100", "patch 14")
        self.refused([SOFTMAX, "--images", IMAGES[0], "--sizes", "112,abc"], "abc")

    def test_bad_labels(self):
        labels = os.path.join(self.tmp, "labels.json")
        with open(labels, "w") as f:
            f.write("{not json")
        self.refused([SOFTMAX, "--images", *IMAGES[:2], "--labels", labels, "--resize", "none"], "labels.json")
        with open(labels, "w") as f:
            json.dump({}, f)
        self.refused([SOFTMAX, "--images", *IMAGES[:2], "--labels", labels, "--resize", "none"], "no label for")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
