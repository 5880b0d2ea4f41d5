#!/usr/bin/env python3
"""A large input under a memory cap (docs/design.md, "Dense features at resolution"): a 2044 px
image through a ViT-S/14-shaped model (dim 384, 6 heads, 4 registers; one block, so that it
takes seconds) is refused under a cap below its forward's estimate, with the estimate and the
cap in the message, and runs inside a cap of that estimate, measured as the child's peak RSS.

usage: large_input_test.py VITREG_BINARY REPO_ROOT   (not run sanitized: ASan's shadow memory
is no forward's)"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

VITREG, ROOT = sys.argv[1], sys.argv[2]
DIM, HEADS, PATCH, REGISTERS, DEPTH, GRID = 384, 6, 14, 4, 1, 37
PIXELS = 2044  # 146 x 146 patches: 21,321 tokens
TOKENS = 1 + REGISTERS + (PIXELS // PATCH) ** 2


def write_model(path):
    """A random ViT-S/14 of DEPTH blocks in the DINOv2 layout, its position table at GRID."""
    rng = np.random.default_rng(44)
    t = {"cls_token": rng.normal(0, 0.5, (1, 1, DIM)), "register_tokens": rng.normal(0, 0.5, (1, REGISTERS, DIM)),
         "pos_embed": rng.normal(0, 0.2, (1, 1 + GRID * GRID, DIM)),
         "patch_embed.proj.weight": rng.normal(0, 0.02, (DIM, 3, PATCH, PATCH)), "patch_embed.proj.bias": np.zeros(DIM),
         "norm.weight": np.ones(DIM), "norm.bias": np.zeros(DIM)}
    for i in range(DEPTH):
        p = f"blocks.{i}."
        for name, out, inp in [("attn.qkv", 3 * DIM, DIM), ("attn.proj", DIM, DIM), ("mlp.fc1", 4 * DIM, DIM),
                               ("mlp.fc2", DIM, 4 * DIM)]:
            t[p + name + ".weight"] = rng.normal(0, inp ** -0.5, (out, inp))
            t[p + name + ".bias"] = np.zeros(out)
        for norm in ("norm1", "norm2"):
            t[p + norm + ".weight"], t[p + norm + ".bias"] = np.ones(DIM), np.zeros(DIM)
        t[p + "ls1.gamma"], t[p + "ls2.gamma"] = np.full(DIM, 0.1), np.full(DIM, 0.1)
    header, blobs, offset = {}, [], 0
    for name in sorted(t):
        blob = np.ascontiguousarray(t[name], dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t[name].shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"heads": str(HEADS), "patch_size": str(PATCH), "num_registers": str(REGISTERS),
                              "attention": "softmax", "pos_interp": "antialias", "layer_norm_eps": "1e-06"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def peak_rss_mib(cmd):
    """Runs cmd; its exit status, output and the kernel's ru_maxrss for it (MiB)."""
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    out, err = child.stdout.read(), child.stderr.read()  # stderr holds a line or two: no deadlock
    child.stdout.close()
    child.stderr.close()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, out.decode(), err.decode(), usage.ru_maxrss / 1024


class LargeInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "vits14-1block.safetensors")
        write_model(cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def command(self, *extra):
        return [VITREG, "bench", self.model, "--size", f"{PIXELS}x{PIXELS}", "--threads", "2", "--iters", "1",
                "--warmup", "0", *extra]

    def test_a_2044_px_forward_runs_inside_the_cap_of_its_estimate(self):
        # Under a cap of 128 MiB (which the model and a native-size image fit) it is refused before
        # anything is allocated; the message states the estimate, its parts and the cap.
        rc, _, err, _ = peak_rss_mib(self.command("--max-memory", "128M"))
        self.assertNotEqual(rc, 0, err)
        m = re.search(rf"a {PIXELS}x{PIXELS} input makes {TOKENS} tokens, whose forward needs about (\d+) MB "
                      r"\(weights \d+ MB, activations \d+ MB, attention \d+ MB, margin 64 MB\), over the memory cap of 128 MB "
                      r"\(--max-memory", err)
        self.assertIsNotNone(m, err)
        estimate = int(m.group(1))
        # A cap of the estimate (rounded up to whole MiB): it runs, and its peak RSS stays inside.
        cap = estimate + 1
        rc, out, err, peak = peak_rss_mib(self.command("--max-memory", f"{cap}M"))
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"ms/image median")
        print(f"2044 px, ViT-S/14 shape, {DEPTH} block: estimate {estimate} MiB, peak RSS {peak:.0f} MiB", file=sys.stderr)
        self.assertLessEqual(peak, cap)
        # The estimate bounds the peak without being loose enough to refuse what would fit.
        self.assertGreater(peak, 0.5 * estimate)

    def test_bad_sizes_are_refused(self):
        for size, why in [("12Q", "unknown unit 'Q'"), ("0.5M", "under 1 MiB"), ("150%", "a share must be in"),
                          ("lots", "not a number")]:
            rc, _, err, _ = peak_rss_mib(self.command("--max-memory", size))
            self.assertNotEqual(rc, 0, err)
            self.assertIn(f"--max-memory {size}: {why}", err)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
