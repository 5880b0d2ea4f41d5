#!/usr/bin/env python3
"""`vitreg serve` over loopback: the live page in Debian's Chromium (Playwright) must draw the
forward's Probe rows for a clicked patch, change layer and head, reload from the fragment and
take an upload; then bad requests, each a clear 4xx with a JSON message while the server stays
up: an oversized body (sent and only declared), path traversal in the image name, a corrupt
upload, an image declaring a huge size, bad parameters, and more simultaneous forwards than the
bound. Finally SIGTERM stops it cleanly.

usage: serve_test.py VITREG_BINARY REPO_ROOT
"""
import concurrent.futures
import http.client
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zlib

from explore_util import check_browser_tools, checks_for, run_browser_test

VITREG, ROOT = sys.argv[1], sys.argv[2]
W = os.path.join(ROOT, "weights")
SPECS = [os.path.join(W, "vitreg-fmnist-softmax-reg4.safetensors"),
         os.path.join(W, "vitreg-fmnist-softmax1-reg4.safetensors")]
IMAGES = os.path.join(ROOT, "assets", "indist")
FIRST = sorted(f for f in os.listdir(IMAGES) if f.endswith(".png"))[0]
RESIZE = ["--resize", "none"]
MAX_UPLOAD_MB = 1


def huge_png(width=100000, height=100000):
    """A valid PNG header declaring width x height, with one tiny IDAT: a decompression bomb's shape."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


class Serve(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        check_browser_tools()
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-serve-")
        cls.proc = subprocess.Popen([VITREG, "serve", *SPECS, "--images", IMAGES, "--port", "0", *RESIZE,
                                     "--max-upload-mb", str(MAX_UPLOAD_MB), "--max-forwards", "1", "--threads", "1"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = cls.proc.stdout.readline()
        assert line.startswith("vitreg serve: http://127.0.0.1:"), line + cls.proc.stderr.read()
        cls.port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
        cls.url = f"http://127.0.0.1:{cls.port}/"

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.kill()
        cls.proc.wait()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def request(self, method, path, body=None, headers=None, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def error(self, method, path, status, words, body=None, headers=None):
        got, data = self.request(method, path, body, headers)
        self.assertEqual(got, status, data[:300])
        message = json.loads(data)["error"]
        for w in words:
            self.assertIn(w, message)
        self.assertIsNone(self.proc.poll(), "the server must stay up")
        return message

    def test_1_page_in_chromium_with_an_upload(self):
        image = os.path.join(IMAGES, FIRST)
        cases = [(0, 5, "mean", 2, 3), (1, 4, 1, 6, 1), (1, 0, "mean", 0, 0)]
        checks = checks_for(VITREG, SPECS, image, cases, RESIZE)
        shot = os.path.join(self.tmp, "serve.png")
        rc, out = run_browser_test(self.tmp, self.url, checks, screenshot=shot, upload=os.path.join(IMAGES, FIRST))
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIsNone(self.proc.poll())

    def test_2_rows_api(self):
        status, data = self.request("GET", "/api/images")
        self.assertEqual(status, 200)
        names = json.loads(data)["images"]
        self.assertIn(FIRST, names)
        status, data = self.request("GET", "/api/image?name=" + FIRST)
        self.assertEqual(status, 200)
        entry = json.loads(data)
        self.assertEqual(len(entry["configs"]), 2)
        self.assertIsNone(entry["configs"][0]["rows"])
        status, data = self.request("GET", f"/api/rows?image={FIRST}&config=1&query=7&rollout=1")
        self.assertEqual(status, 200)
        rows = json.loads(data)
        c = entry["configs"][1]
        self.assertEqual(rows["rows"]["shape"], [c["layers"], c["heads"], 1, c["tokens"]])
        self.assertEqual(rows["rollout"]["shape"], [1, c["tokens"]])

    def test_3_bad_requests(self):
        self.error("GET", "/api/image?name=../../../etc/passwd", 404, ["no image", "../../../etc/passwd"])
        self.error("GET", "/api/image?name=%2Fetc%2Fpasswd", 404, ["no image"])
        self.error("GET", "/api/image", 400, ["missing parameter 'name'"])
        self.error("GET", "/../../etc/passwd", 404, [])
        self.error("GET", f"/api/rows?image={FIRST}&config=9&query=0", 400, ["config", "0..1"])
        self.error("GET", f"/api/rows?image={FIRST}&config=0&query=-1", 400, ["query"])
        self.error("GET", f"/api/rows?image={FIRST}&config=0&query=x", 400, ["query"])
        self.error("GET", "/api/rows?image=upload-999-gone.png&config=0&query=0", 410, ["upload it again"])
        self.error("POST", "/api/upload", 413, ["limit"], body=b"\0" * (MAX_UPLOAD_MB * 1024 * 1024 + 1))
        start = time.time()
        self.error("POST", "/api/upload", 413, ["limit"], headers={"Content-Length": str(10 ** 12)})
        self.assertLess(time.time() - start, 5, "a huge declared body is refused before reading it")
        self.error("POST", "/api/upload", 422, ["junk.jpg"], body=os.urandom(3000), headers={"X-Filename": "junk.jpg"})
        with open(os.path.join(IMAGES, FIRST), "rb") as f:
            png = f.read()
        self.error("POST", "/api/upload", 422, ["cut.png"], body=png[:len(png) // 2], headers={"X-Filename": "cut.png"})
        self.error("POST", "/api/upload", 422, ["bomb.png", "pixels"], body=huge_png(), headers={"X-Filename": "bomb.png"})
        self.error("POST", "/api/upload", 400, ["no body"], body=b"")
        # A traversal in the upload's name only names it: nothing is written or read there.
        status, data = self.request("POST", "/api/upload", body=png, headers={"X-Filename": "../../x.png"})
        self.assertEqual(status, 200, data[:300])
        self.assertNotIn("/", json.loads(data)["name"])

    def test_4_concurrent_forwards_beyond_the_bound(self):
        # A 512x512 photo at --resize none: a 36x36 grid, a forward slow enough to overlap; the
        # clients start together, so a loaded machine cannot serialize them by accident.
        with open(os.path.join(ROOT, "assets", "images", "astronaut.jpg"), "rb") as f:
            photo = f.read()
        clients = 8
        start = threading.Barrier(clients)

        def upload(i):
            start.wait()
            return self.request("POST", "/api/upload", body=photo, headers={"X-Filename": f"c{i}.jpg"})

        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(upload, range(clients)))
        statuses = [s for s, _ in results]
        self.assertTrue(set(statuses) <= {200, 429}, statuses)
        self.assertIn(200, statuses)
        self.assertIn(429, statuses, "with --max-forwards 1, some of 8 simultaneous forwards must be refused")
        for s, data in results:
            if s == 429:
                self.assertIn("busy", json.loads(data)["error"])
        status, _ = self.request("GET", "/api/images")
        self.assertEqual(status, 200)

    def test_5_sigterm_stops_cleanly(self):
        proc = subprocess.Popen([VITREG, "serve", SPECS[0], "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
        self.assertIn("http://127.0.0.1:", proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=30), 0, proc.stderr.read())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
