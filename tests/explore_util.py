"""What the explorer tests share: the reference rows from `vitreg maps` (the forward's own
Probe rows, independent of the explorer's code), and the Playwright run of
tests/browser/explore_test.mjs in Debian's Chromium."""
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

NODE = os.environ.get("VITREG_NODE") or shutil.which("node")  # VITREG_NODE: another Node.js to try
HERE = os.path.dirname(os.path.abspath(__file__))
BROWSER = os.path.join(HERE, "browser")


def check_browser_tools():
    """Fails (not skips) when the browser test's tools are missing: CI must run it."""
    if NODE is None or shutil.which("chromium") is None:
        raise RuntimeError("node and chromium are needed: run scripts/setup.sh --tests")
    if not os.path.isdir(os.path.join(BROWSER, "node_modules", "playwright-core")):
        raise RuntimeError("playwright-core is not installed in tests/browser: run scripts/setup.sh --tests")


def split_spec(spec):
    """'MODEL@softmax1@bf16@evict=sink' -> ('MODEL', the `vitreg maps` options that mean the same)."""
    parts = spec.split("@")
    args = []
    for p in parts[1:]:
        if p in ("softmax", "softmax1", "sink"):
            args += ["--attention", p]
        elif p in ("fp32", "bf16", "int8"):
            args += ["--precision", p]
        elif p.startswith("evict="):
            args += ["--evict", p[len("evict="):]]
        else:
            raise ValueError("split_spec: " + p)
    return parts[0], args


def reference_rows(vitreg, spec, image, row, col, extra=()):
    """[layers, heads, tokens]: every layer's and head's attention row of patch (row, col), as the
    forward recorded it (vitreg maps --save-attention)."""
    model, args = split_spec(spec)
    out = tempfile.mkdtemp(prefix="vitreg-ref-")
    try:
        r = subprocess.run([vitreg, "maps", model, image, "-o", out, "--query", f"patch:{row},{col}", "--save-attention",
                            *args, *extra], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
        assert r.returncode == 0, r.stderr
        found = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if f == "attention.npy"]
        assert len(found) == 1, found
        return np.load(found[0])[:, :, 0, :]
    finally:
        shutil.rmtree(out, ignore_errors=True)


def checks_for(vitreg, specs, image, cases, extra=()):
    """The browser test's checks: per (config, layer, head, row, col), the reference row."""
    checks = []
    cache = {}
    for config, layer, head, row, col in cases:
        key = (config, row, col)
        if key not in cache:
            cache[key] = reference_rows(vitreg, specs[config], image, row, col, extra)
        rows = cache[key][layer]
        expected = rows.mean(axis=0) if head == "mean" else rows[head]
        # The page holds each head's row to within its max / 510; a mean of heads to the mean of those.
        heads = rows if head == "mean" else rows[head:head + 1]
        tolerance = float((heads.max(axis=-1) / 510).mean()) + 1e-6
        checks.append({"config": config, "layer": layer, "head": head, "row": row, "col": col,
                       "expected": [float(v) for v in expected], "tolerance": tolerance})
    return checks


def run_browser_test(tmp, url, checks, screenshot=None, upload=None):
    """Runs explore_test.mjs; returns (returncode, output)."""
    expected = os.path.join(tmp, "expected.json")
    with open(expected, "w") as f:
        json.dump({"checks": checks}, f)
    cmd = [NODE, os.path.join(BROWSER, "explore_test.mjs"), url, expected]
    if screenshot:
        cmd.append(screenshot)
    if upload:
        cmd += ["--upload", upload]
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, cwd=BROWSER,
                       env={**os.environ, "HOME": tmp})
    return r.returncode, r.stdout + r.stderr
