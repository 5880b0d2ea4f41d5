#!/usr/bin/env python3
"""`vitreg explore` in a real browser: the page is opened from a file (no server, no network)
in Debian's Chromium driven by Playwright; clicking a patch must draw that query's attention row
as the forward's Probe recorded it (within the page's 8-bit quantization), for each
configuration (a retrofit, bf16, an eviction), layer and head; layer and head change from the
keyboard; a reload from the URL fragment reopens the same view; no console error. Then the
command's refusals: a bad --queries, a page over its budget, a corrupt image: a message, a
non-zero exit and no page.

usage: explore_test.py VITREG_BINARY REPO_ROOT
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

import numpy as np

from explore_util import check_browser_tools, checks_for, run_browser_test

VITREG, ROOT = sys.argv[1], sys.argv[2]
W = os.path.join(ROOT, "weights")
SPECS = [os.path.join(W, "vitreg-fmnist-softmax-reg4.safetensors"),
         os.path.join(W, "vitreg-fmnist-softmax-reg4.safetensors") + "@softmax1@bf16",
         os.path.join(W, "vitreg-fmnist-sink.safetensors") + "@evict=sink"]
IMAGE = os.path.join(ROOT, "assets", "indist", "fmnist_canvas_4_bag.png")
RESIZE = ["--resize", "none"]


def explore(out, *args, specs=SPECS, images=(IMAGE,)):
    return subprocess.run([VITREG, "explore", *specs, "--images", *images, "-o", out, *RESIZE, *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)


def page_data(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script id="vitreg-data" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(m.group(1))


def q8(blob):
    data = base64.b64decode(blob["data"])
    if blob["codec"] == "deflate":
        data = zlib.decompress(data)
    values = np.frombuffer(data, np.uint8).astype(np.float32).reshape(blob["shape"])
    scale = np.frombuffer(base64.b64decode(blob["scale"]), "<f4").reshape(blob["shape"][:-1])
    return values * scale[..., None]


class ExplorePage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_browser_tools()
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-explore-")
        cls.page = os.path.join(cls.tmp, "explore.html")
        r = explore(cls.page)
        assert r.returncode == 0, r.stderr
        cls.data = page_data(cls.page)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_data_holds_every_query_of_every_configuration(self):
        self.assertEqual(self.data["format"], "vitreg-explore/1")
        configs = self.data["images"][0]["configs"]
        self.assertEqual([c["attention"] for c in configs], ["softmax", "softmax1", "sink"])
        self.assertEqual(configs[1]["precision"], "bf16")
        self.assertEqual(configs[2]["intervention"], "evict=sink")
        for c in configs:
            self.assertEqual(c["queries"], list(range(c["tokens"])))
            rows = q8(c["rows"])
            self.assertEqual(rows.shape, (c["layers"], c["heads"], c["tokens"], c["tokens"]))
            # Each row sums to 1 minus its abstention, within the quantization.
            abst = q8(c["abstention"])
            err = np.abs(rows.sum(-1) + abst - 1).max()
            self.assertLess(err, c["tokens"] * 2 / 255, c["label"])

    def test_the_stored_rows_are_the_forwards_rows(self):
        # Independently of the browser: the page's bytes against `vitreg maps` (the Probe).
        from explore_util import reference_rows
        for k, spec in enumerate(SPECS):
            c = self.data["images"][0]["configs"][k]
            rows = q8(c["rows"])
            token = c["queries"].index(1 + c["registers"] + 3 * c["grid"][1] + 5)
            want = reference_rows(VITREG, spec, IMAGE, 3, 5, RESIZE)
            got = rows[:, :, token, :]
            tol = want.max(-1, keepdims=True) / 510 + 1e-6
            self.assertTrue((np.abs(got - want) <= tol).all(), f"{c['label']}: {np.abs(got - want).max()}")

    def test_in_chromium_click_layer_head_reload(self):
        cases = [(0, 5, "mean", 2, 3), (1, 5, 0, 4, 6), (2, 3, 1, 7, 0), (0, 0, 1, 0, 7), (2, 5, "mean", 3, 5)]
        checks = checks_for(VITREG, SPECS, IMAGE, cases, RESIZE)
        shot = os.environ.get("VITREG_EXPLORE_SCREENSHOT") or os.path.join(self.tmp, "explore.png")
        rc, out = run_browser_test(self.tmp, "file://" + self.page, checks, screenshot=shot)
        self.assertEqual(rc, 0, out[-4000:])
        self.assertTrue(os.path.getsize(shot) > 10000)

    def test_the_browser_check_can_fail(self):
        cases = [(0, 5, "mean", 2, 3)]
        checks = checks_for(VITREG, SPECS, IMAGE, cases, RESIZE)
        checks[0]["expected"] = [v + 0.05 for v in checks[0]["expected"]]
        rc, out = run_browser_test(self.tmp, "file://" + self.page, checks)
        self.assertNotEqual(rc, 0, "a wrong expected row must fail the browser test:\n" + out[-2000:])


class ExploreRefusals(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vitreg-explore-bad-")
        self.out = os.path.join(self.tmp, "page.html")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def refused(self, r, *words):
        self.assertNotEqual(r.returncode, 0, r.stderr)
        for w in words:
            self.assertIn(w, r.stderr)
        self.assertFalse(os.path.exists(self.out), "a refused page must not be written")
        self.assertEqual(os.listdir(self.tmp), [], "nothing half-written")

    def test_bad_queries(self):
        self.refused(explore(self.out, "--queries", "stride:0"), "stride")
        self.refused(explore(self.out, "--queries", "3;4"), "--queries", "3")
        self.refused(explore(self.out, "--queries", "30,1"), "outside", "8x8")

    def test_over_budget(self):
        self.refused(explore(self.out, "--queries", "all", "--max-page-mb", "1", images=[IMAGE] * 8), "budget", "MiB")

    def test_auto_queries_fit_the_budget_with_a_stride(self):
        r = explore(self.out, "--max-page-mb", "1", images=[IMAGE] * 8)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"patches at stride [2-9]")
        c = page_data(self.out)["images"][0]["configs"][0]
        self.assertLess(len(c["queries"]), c["tokens"])
        self.assertEqual(c["queries"][:5], [0, 1, 2, 3, 4])  # CLS and the registers always

    def test_corrupt_image(self):
        bad = os.path.join(tempfile.mkdtemp(prefix="vitreg-img-"), "broken.png")
        with open(IMAGE, "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[:len(data) // 3])
        self.refused(explore(self.out, images=[bad]), "broken.png")
        shutil.rmtree(os.path.dirname(bad))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
