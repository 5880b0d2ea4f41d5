#!/usr/bin/env python3
"""The compare report in a real browser: headless Chromium (Debian's `chromium`) opens
report.html from a file, with no server; the page must log no console error, every embedded
image must decode, and a screenshot must show the comparison grid.

usage: report_test.py VITREG_BINARY REPO_ROOT
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

VITREG, ROOT = sys.argv[1], sys.argv[2]
CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def chromium(tmp, *args):
    profile = tempfile.mkdtemp(dir=tmp)
    return subprocess.run([CHROMIUM, *FLAGS, "--user-data-dir=" + profile, *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def console_errors(stderr):
    """Lines where the page itself logged to the console or threw (Chromium's own dbus noise excluded)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def decode_png(path):
    """8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes) → (width, height, rows of pixel tuples)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        ftype, cur = line[0], bytearray(line[1:])
        for i in range(stride):
            a = cur[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if ftype == 1:
                cur[i] = (cur[i] + a) & 255
            elif ftype == 2:
                cur[i] = (cur[i] + b) & 255
            elif ftype == 3:
                cur[i] = (cur[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(cur[x * channels:x * channels + 3]) for x in range(width)])
        prev = cur
    return width, height, rows


class ReportInBrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed: run scripts/setup.sh --tests")
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-report-")
        cls.out = os.path.join(cls.tmp, "cmp")
        assets = os.path.join(ROOT, "assets", "images")
        r = subprocess.run([VITREG, "compare", "vitreg-untrained-s14-d192-reg4", "vitreg-untrained-s14-d192-reg4@softmax1",
                            "--images", os.path.join(assets, "chelsea.png"), os.path.join(assets, "coffee.jpg"),
                            "-o", cls.out], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
        assert r.returncode == 0, r.stderr
        cls.url = "file://" + os.path.join(cls.out, "report.html")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_console_check_can_fail(self):
        bad = os.path.join(self.tmp, "bad.html")
        with open(bad, "w") as f:
            f.write("<html><body><script>no_such_function();</script></body></html>")
        r = chromium(self.tmp, "--dump-dom", "file://" + bad)
        self.assertTrue(console_errors(r.stderr), "a thrown error must show in Chromium's log")

    def test_loads_without_console_errors_and_every_image_decodes(self):
        r = chromium(self.tmp, "--dump-dom", self.url)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(console_errors(r.stderr), [])
        m = re.search(r'data-images="(\d+)/(\d+)"', r.stdout)
        self.assertIsNotNone(m, "the report's script did not run")
        self.assertEqual(m.group(1), m.group(2))
        self.assertGreaterEqual(int(m.group(2)), 3)  # the grid + one histogram per configuration
        self.assertIn("<svg", r.stdout)
        self.assertIn("norm_max", r.stdout)

    def test_screenshot_shows_the_grid(self):
        shot = os.path.join(self.tmp, "shot.png")
        r = chromium(self.tmp, "--window-size=1400,1000", "--screenshot=" + shot, self.url)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(console_errors(r.stderr), [])
        width, height, rows = decode_png(shot)
        self.assertEqual((width, height), (1400, 1000))
        # The grid sits near the top: its colour-mapped tiles (viridis: purple to green/yellow,
        # photos underneath) make the region colourful where an empty page would be white.
        region = [px for row in rows[150:600] for px in row[100:1000]]
        colourful = sum(1 for (r_, g, b) in region if max(r_, g, b) - min(r_, g, b) > 40)
        self.assertGreater(colourful / len(region), 0.5)
        greenish = sum(1 for (r_, g, b) in region if g > r_ + 20 and g > b)
        self.assertGreater(greenish / len(region), 0.05)  # viridis norm maps


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
