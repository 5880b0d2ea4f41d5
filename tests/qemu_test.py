#!/usr/bin/env python3
"""The default build on older CPUs: the same vitreg binary under qemu-user as an x86-64-v2 CPU
(-cpu Nehalem: SSE4.2, no AVX) and as an AVX2 + FMA CPU (-cpu Haswell-v4) runs, says which
kernels it chose (fp32, int8, int4), and extracts the same features as the native run (within
1e-5 of their scale at fp32; at int4 within 2e-3, the flips of its rounded activations). qemu
7.2 emulates no AVX-512; those kernels are tested natively where the CPU has them (VITREG_ISA
forces each path in the other tests).

usage: qemu_test.py VITREG_BINARY REPO_ROOT
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np

VITREG, ROOT = sys.argv[1], sys.argv[2]
MODEL = "vitreg-fmnist-softmax-reg4"  # trained, registers: CLS, pooled, registers and patches
IMAGES = [os.path.join(ROOT, "assets", "images", n) for n in ("coffee.jpg", "camera.png")]
QEMU = "/usr/bin/qemu-x86_64"
# CPU model → the fp32 kernels the default build must pick on it.
CPUS = {"Nehalem": "portable", "Haswell-v4": "avx2"}


def run(cpu, *args, env=None):
    cmd = ([QEMU, "-cpu", cpu] if cpu else []) + [VITREG, *args]
    e = {k: v for k, v in os.environ.items() if not k.startswith("VITREG_") or k == "VITREG_WEIGHTS"}
    e.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900, env=e)


def kernels(cpu, *extra):
    r = run(cpu, "bench", MODEL, "--images", IMAGES[0], "--iters", "1", "--warmup", "0", *extra)
    assert r.returncode == 0, r.stderr
    m = re.search(r"kernels ([^)]*(?:\([^)]*\))?[^)]*)\)\n", r.stdout)
    assert m, r.stdout
    return m.group(1)


def features(cpu, out, *extra):
    r = run(cpu, "extract", MODEL, *IMAGES, "-o", out, "--threads", "2", "--patch-tokens", *extra)
    assert r.returncode == 0, r.stderr
    got = {n: np.load(os.path.join(out, f"{n}.npy")) for n in ("cls", "pooled", "registers")}
    for row in range(len(IMAGES)):
        got[f"patch/{row}"] = np.load(os.path.join(out, "patch", f"{row}.npy"))
    return got


class OlderCpus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.native = features(None, os.path.join(cls.tmp.name, "native"))
        cls.native_int4 = features(None, os.path.join(cls.tmp.name, "native_int4"), "--precision", "int4")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_each_cpu_picks_its_kernels(self):
        for cpu, want in CPUS.items():
            with self.subTest(cpu=cpu):
                self.assertEqual(kernels(cpu), want)
                int8 = kernels(cpu, "--precision", "int8")
                self.assertTrue(int8.startswith(f"{want} (vnni emulated)" if want == "avx2" else "portable"), int8)
                # int4's codes (|q - 8| <= 8) run vpmaddubsw exactly where there is no VNNI
                int4 = kernels(cpu, "--precision", "int4")
                self.assertTrue(int4.startswith("avx2 vpmaddubsw" if want == "avx2" else "portable"), int4)

    def test_features_equal_the_native_run(self):
        for cpu, precision in [(cpu, p) for cpu in CPUS for p in ("fp32", "int4")]:
            with self.subTest(cpu=cpu, precision=precision):
                got = features(cpu, os.path.join(self.tmp.name, cpu + precision), "--precision", precision)
                native = self.native if precision == "fp32" else self.native_int4
                # int4's kernels give the same integers everywhere, but its uint8 activations are
                # rounded from fp32 values that differ by ~1e-7 between instruction sets: now and
                # then one code lands a step apart and the flip propagates (measured: 3.5e-4).
                bound = 1e-5 if precision == "fp32" else 2e-3
                for name, want in native.items():
                    self.assertEqual(got[name].shape, want.shape, name)
                    scale = float(np.max(np.abs(want)))
                    err = float(np.max(np.abs(got[name] - want)))
                    self.assertLessEqual(err, bound * scale, f"{cpu} {precision} {name}: max |Δ| {err:.2e} of scale {scale:.2e}")

    def test_forcing_a_set_the_cpu_lacks_is_refused(self):
        r = run("Nehalem", "bench", MODEL, "--iters", "1", "--warmup", "0", env={"VITREG_ISA": "avx2"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("VITREG_ISA=avx2: this CPU cannot run it (its best is portable)", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
