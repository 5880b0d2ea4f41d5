#!/usr/bin/env python3
"""vitreg-viewer in a real window: an X server (Debian's xvfb) runs the viewer, xdotool clicks a
patch and presses keys, xwd takes screenshots, and the view must change as asked: the clicked
patch becomes the query, '[' moves one layer down, 'n' flips to the next configuration.

usage: viewer_test.py VIEWER_BINARY REPO_ROOT
"""
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from xwd_util import read_xwd

VIEWER, ROOT = sys.argv[1], sys.argv[2]
STATUS_GREY = (40, 40, 40)  # the status bar under the view
MAIN = 448                  # the main map's side in px (112 px canvases scaled ×4)


class ViewerInXvfb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("Xvfb", "xdotool", "xwd"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is not installed: run scripts/setup.sh --tests")
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-viewer-")
        cls.display = f":{50 + os.getpid() % 200}"
        cls.xvfb = subprocess.Popen(["Xvfb", cls.display, "-screen", "0", "1400x1000x24", "-nolisten", "tcp"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.env = dict(os.environ, DISPLAY=cls.display, XDG_RUNTIME_DIR=cls.tmp)
        time.sleep(1.5)
        models = [os.path.join(ROOT, "weights", f"vitreg-fmnist-{c}.safetensors") for c in ("softmax", "sink")]
        image = os.path.join(ROOT, "assets", "indist", "fmnist_canvas_1_coat.png")
        cls.viewer = subprocess.Popen([VIEWER, *models, image, "--resize", "none"], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, env=cls.env)
        cls.lines = queue.Queue()
        threading.Thread(target=lambda: [cls.lines.put(l.strip()) for l in cls.viewer.stdout], daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        for p in (cls.viewer, cls.xvfb):
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def view_line(self, containing, timeout=20):
        """The next 'view: …' line the viewer prints that holds `containing`."""
        end = time.time() + timeout
        while time.time() < end:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line.startswith("view:") and containing in line:
                return line
        self.fail(f"the viewer never showed a view with {containing!r}")

    def xdotool(self, *args):
        subprocess.run(["xdotool", *args], env=self.env, check=True, timeout=20)

    def screenshot(self, name):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            subprocess.run(["xwd", "-root", "-silent"], env=self.env, stdout=f, check=True, timeout=20)
        return read_xwd(path)

    def test_click_and_keys_change_the_view(self):
        self.view_line("query cls")
        time.sleep(1.0)  # let the window map and paint
        width, height, before = self.screenshot("before.xwd")
        # Find the view: the status bar's grey band, the main map right above it.
        bar = next((y, row.index(STATUS_GREY)) for y, row in enumerate(before) if row.count(STATUS_GREY) > 300)
        top, left = bar[0] - MAIN, bar[1]
        self.assertGreaterEqual(top, 0)
        # Click the patch at grid row 2, column 5 (8×8 patches of 56 screen px).
        self.xdotool("mousemove", str(left + 5 * 56 + 28), str(top + 2 * 56 + 28), "click", "1")
        self.view_line("query patch:2,5")
        time.sleep(0.5)
        _, _, clicked = self.screenshot("clicked.xwd")
        changed = sum(1 for y in range(top, top + MAIN) for x in range(left, left + MAIN, 4) if before[y][x] != clicked[y][x])
        self.assertGreater(changed, 1000, "the map did not change after the click")
        window = subprocess.run(["xdotool", "search", "--name", "vitreg-viewer"], env=self.env, capture_output=True,
                                text=True, check=True).stdout.split()[0]
        self.xdotool("windowfocus", "--sync", window)
        self.xdotool("key", "--window", window, "bracketleft")
        self.view_line("layer 4/5 | head mean | query patch:2,5")
        self.xdotool("key", "--window", window, "n")
        self.view_line("vitreg-fmnist-sink.safetensors | attention | layer 4/5 | head mean | query patch:2,5")
        self.xdotool("key", "--window", window, "q")
        self.assertEqual(self.viewer.wait(timeout=20), 0)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
