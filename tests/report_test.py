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

from png_util import decode_png

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
