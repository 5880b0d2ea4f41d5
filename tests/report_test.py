#!/usr/bin/env python3
"""The compare report in a real browser: headless Chromium (Debian's `chromium`) opens
report.html from a file, with no server; the page must log no console error, every embedded
image must decode, the per-configuration summary must open it, and a screenshot must show the
comparison grid. The same for `vitreg eval correspondence`'s page on opencv-doc's graf pair: its
table (one row per configuration) first, then the PCK plot, the matches and the protocol.

usage: report_test.py VITREG_BINARY REPO_ROOT
"""
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
CONFIGS = ["vitreg-untrained-s14-d192-reg4", "vitreg-untrained-s14-d192-reg4@softmax1"]


class ReportInBrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed: run scripts/setup.sh --tests")
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-report-")
        cls.out = os.path.join(cls.tmp, "cmp")
        assets = os.path.join(ROOT, "assets", "images")
        r = subprocess.run([VITREG, "compare", *CONFIGS, "--images", os.path.join(assets, "chelsea.png"), os.path.join(assets, "coffee.jpg"),
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

    def test_the_summary_opens_the_report(self):
        r = chromium(self.tmp, "--dump-dom", self.url)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        dom = r.stdout
        start = dom.find('<table class="summary">')
        self.assertGreater(start, 0, "no summary table")
        self.assertLess(start, dom.index("<img"), "the summary comes before the grid")
        self.assertLess(start, dom.index('<table class="stats">'), "the summary comes before the per-image table")
        summary = dom[start:dom.index("</table>", start)]
        head, body = summary.split("<tbody>")
        rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
        self.assertEqual(len(rows), len(CONFIGS))  # one row per configuration
        for row, config in zip(rows, CONFIGS):
            self.assertTrue(re.match(r"<td>" + re.escape(config), row), row[:200])
            self.assertEqual(row.count("<td"), 1 + 16)  # the label, then the 16 statistics after "grid"
        self.assertEqual(head.count("\u2193"), 11)  # the ranked, artifact-related columns (flagged count and share included)
        for cell in re.findall(r'<td class="best">(.*?)</td>', body, re.S):
            self.assertIn("\u2605", cell)
        self.assertIn("lowest mean", dom[start:])  # the page says what the star marks

    def test_screenshot_shows_the_grid(self):
        shot = os.path.join(self.tmp, "shot.png")
        r = chromium(self.tmp, "--window-size=1400,1000", "--screenshot=" + shot, self.url)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(console_errors(r.stderr), [])
        width, height, rows = decode_png(shot)
        self.assertEqual((width, height), (1400, 1000))
        # The grid follows the summary table on the first screen: its colour-mapped tiles
        # (viridis: purple to green/yellow, photos underneath) make rows colourful where the
        # page around them is white.
        def colourful(px):
            return max(px) - min(px) > 40
        lines = [y for y in range(150, height) if sum(map(colourful, rows[y][100:1000])) > 450]
        self.assertGreater(len(lines), 300, "no grid on the first screen")
        region = [px for row in rows[lines[0]:lines[0] + 400] for px in row[100:1000]]
        greenish = sum(1 for (r_, g, b) in region if g > r_ + 20 and g > b)
        self.assertGreater(greenish / len(region), 0.05)  # viridis norm maps


class EvalReportInBrowser(unittest.TestCase):
    MODEL = os.path.join(ROOT, "weights", "vitreg-fmnist-softmax.safetensors")
    GRAF = "/usr/share/doc/opencv-doc/examples/data/"

    def test_loads_with_its_table_plot_matches_and_protocol_in_order(self):
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed: run scripts/setup.sh --tests")
        with tempfile.TemporaryDirectory(prefix="vitreg-eval-report-") as tmp:
            out = os.path.join(tmp, "eval")
            configs = [self.MODEL, self.MODEL + "@sink"]
            r = subprocess.run([VITREG, "eval", "correspondence", *configs, "--pair", self.GRAF + "graf1.png", self.GRAF + "graf3.png",
                                self.GRAF + "H1to3p.xml", "--resize", "long:224", "-o", out],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = chromium(tmp, "--dump-dom", "file://" + os.path.join(out, "report.html"))
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            self.assertEqual(console_errors(r.stderr), [])
            dom = r.stdout
            m = re.search(r'data-images="(\d+)/(\d+)"', dom)
            self.assertIsNotNone(m, "the report's script did not run")
            self.assertEqual(m.groups(), ("2", "2"))  # one picture of the matches per configuration
            table = dom[dom.index('<table class="stats">'):]
            rows = re.findall(r"<tr>(.*?)</tr>", table[table.index("<tbody>"):table.index("</table>")], re.S)
            self.assertEqual(len(rows), len(configs))
            order = [dom.index('<table class="stats">'), dom.index("<svg"), dom.index("<img"), dom.index("H1to3p.xml")]
            self.assertEqual(order, sorted(order), "table, plot, matches, protocol")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
