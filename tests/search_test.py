#!/usr/bin/env python3
"""`vitreg index`, `vitreg search` and the search page of `vitreg serve --index` (issue #51):
the shipped photos extracted with the shipped model and indexed exactly (one of them as a member
of an uncompressed tar shard, one in a compressed shard); each image's search finds it first
with score 1; the page in Debian's Chromium (Playwright) takes an upload, draws the thumbnails
(the shard member's read at its offset, the compressed one refused) and searches from a click;
bad input is refused by name, bad requests with a 4xx and a JSON message.

usage: search_test.py VITREG_BINARY REPO_ROOT
"""
import gzip
import http.client
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

from explore_util import BROWSER, NODE, check_browser_tools

VITREG, ROOT = sys.argv[1], os.path.abspath(sys.argv[2])
MODEL = os.path.join(ROOT, "weights", "vitreg-untrained-s14-d192-reg4.safetensors")
ASSETS = os.path.join(ROOT, "assets", "images")
ENV = {**os.environ, "OMP_WAIT_POLICY": "passive"}


def vitreg(*args):
    return subprocess.run([VITREG, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, env=ENV, timeout=600)


def shard_rows(tmp, features):
    """Rewrites the manifest: coffee.jpg as member "coffee.jpg" of shard.tar, camera.png of shard.tar.gz."""
    tar = os.path.join(tmp, "shard.tar")
    with tarfile.open(tar, "w") as t:
        t.add(os.path.join(ASSETS, "chelsea.png"), arcname="first.png")
        t.add(os.path.join(ASSETS, "coffee.jpg"), arcname="coffee.jpg")
    with tarfile.open(tar) as t:
        offset = t.getmember("coffee.jpg").offset  # its header's, as read back
    with open(tar, "rb") as f, gzip.open(tar + ".gz", "wb") as g:
        g.write(f.read())
    path = os.path.join(features, "manifest.jsonl")
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    for row in rows:
        name = os.path.basename(row["path"])
        if name == "coffee.jpg":
            row.update(key="shard-coffee", shard=tar, offset=offset, caption="a cup")
        elif name == "camera.png":
            row.update(key="gz-camera", shard=tar + ".gz", offset=0)
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


class Search(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-search-")
        cls.features, cls.index = os.path.join(cls.tmp, "features"), os.path.join(cls.tmp, "index")
        r = vitreg("extract", MODEL, ASSETS, "-o", cls.features, "--threads", "1", "-q")
        assert r.returncode == 0, r.stderr
        shard_rows(cls.tmp, cls.features)
        r = vitreg("index", cls.features, "-o", cls.index, "--factory", "Flat")
        assert r.returncode == 0, r.stderr
        cls.index_said = r.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_1_each_image_finds_itself_first(self):
        self.assertIn("5 rows of 192 as Flat", self.index_said)
        r = vitreg("search", self.index, MODEL, ASSETS, "-k", "3", "--threads", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual(len(lines), 5)
        for line in lines:
            best = line["results"][0]
            self.assertEqual(len(line["results"]), 3)
            self.assertAlmostEqual(best["score"], 1.0, delta=1e-5)
            if best.get("shard"):
                self.assertIn(best["key"], ("shard-coffee", "gz-camera"))
                self.assertTrue(best["path"].endswith(("coffee.jpg", "camera.png")))
            else:
                self.assertEqual(best["path"], line["query"])
        coffee = next(l["results"][0] for l in lines if l["query"].endswith("coffee.jpg"))
        self.assertEqual(coffee["metadata"]["caption"], "a cup")

    def test_2a_a_search_unlike_the_extract_is_refused(self):
        r = vitreg("search", self.index, MODEL, os.path.join(ASSETS, "coffee.jpg"), "--resize", "long:112", "-k", "2",
                   "--threads", "1")
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("--resize long:112 contradicts the index's features, extracted with --resize eval", r.stderr)

    def test_2b_bad_input_is_refused_by_name(self):
        cases = [(["index", self.tmp, "-o", os.path.join(self.tmp, "x")], "manifest.jsonl"),
                 (["index", self.features, "-o", os.path.join(self.tmp, "x"), "--feature", "pooled", "--factory", "Nonsense"],
                  "Nonsense"),
                 (["index", self.features, "-o", os.path.join(self.tmp, "x"), "--memory", "lots"], "memory"),
                 (["search", self.features, MODEL, ASSETS], "index.json"),
                 (["search", self.index, MODEL, ASSETS, "-k", "6"], "k = 6 is outside 1..5")]
        for args, words in cases:
            r = vitreg(*args)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(words, r.stderr, args)
            self.assertNotIn("terminate", r.stderr)

    def test_3_search_page(self):
        check_browser_tools()
        proc = subprocess.Popen([VITREG, "serve", MODEL, "--index", self.index, "--port", "0", "--threads", "1",
                                 "--max-upload-mb", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, env=ENV)
        try:
            line = proc.stdout.readline()
            self.assertTrue(line.startswith("vitreg serve: http://127.0.0.1:"), line)
            port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
            self.requests(port)
            expected = os.path.join(self.tmp, "expected.json")
            with open(expected, "w") as f:
                json.dump({"upload_key": os.path.join(ASSETS, "astronaut.jpg"), "results": 5, "no_thumbnail": 1}, f)
            r = subprocess.run([NODE, os.path.join(BROWSER, "search_test.mjs"), f"http://127.0.0.1:{port}/search",
                                os.path.join(ASSETS, "astronaut.jpg"), expected, os.path.join(self.tmp, "search.png")],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, cwd=BROWSER,
                               env={**ENV, "HOME": self.tmp})
            print(r.stdout + r.stderr)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finally:
            proc.terminate()
            proc.communicate(timeout=30)

    def requests(self, port):
        def get(method, path, body=None):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request(method, path, body=body)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, data
        with open(os.path.join(self.index, "ids.jsonl")) as f:
            ids = {json.loads(line)["key"]: i for i, line in enumerate(f)}
        status, data = get("GET", f"/api/thumb?id={ids['shard-coffee']}")
        self.assertEqual(status, 200)
        with open(os.path.join(ASSETS, "coffee.jpg"), "rb") as f:
            self.assertEqual(data, f.read())  # read from the shard
        for path, want, words in [(f"/api/thumb?id={ids['gz-camera']}", 422, "compressed"),
                                  (f"/api/search?id={ids['gz-camera']}", 422, "compressed"),
                                  ("/api/thumb?id=5", 400, "0..4"), ("/api/thumb?id=../../etc", 400, "whole number"),
                                  ("/api/search?id=0&k=0", 400, "1..100")]:
            status, data = get("GET", path)
            self.assertEqual(status, want, path)
            self.assertIn(words, json.loads(data)["error"], path)
        status, data = get("POST", "/api/search", b"not an image")
        self.assertEqual(status, 422, data)
        status, data = get("POST", "/api/search", b"x" * (3 << 20))
        self.assertEqual(status, 413)
        status, data = get("GET", f"/api/search?id={ids['shard-coffee']}&k=2")
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["results"][0]["key"], "shard-coffee")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
