#!/usr/bin/env python3
"""What the vitreg command prints for programs and under --quiet: `info --json` and `bench --json`
parse and hold every field docs/cli.md documents, with its type (and nothing undocumented at the
top level); --quiet leaves stderr empty on success and still prints errors.

usage: cli_output_test.py VITREG_BINARY REPO_ROOT
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

VITREG, ROOT = sys.argv[1], sys.argv[2]
MODEL = "vitreg-untrained-s14-d192-reg4"
IMAGE = os.path.join(ROOT, "assets", "images", "chelsea.png")

TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}


def vitreg(*args):
    return subprocess.run([VITREG, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)


def documented_fields(command):
    """{dotted field: (type, nullable)} from docs/cli.md's table for `vitreg COMMAND --json`."""
    with open(os.path.join(ROOT, "docs", "cli.md")) as f:
        text = f.read()
    section = text.split(f"### `vitreg {command} --json`", 1)[1].split("\n#", 1)[0]
    fields = {}
    for name, kind in re.findall(r"^\| `([\w.]+)` \| ([\w ]+) \|", section, re.M):
        nullable = kind.endswith(" or null")
        fields[name] = (kind.removesuffix(" or null"), nullable)
    assert fields, f"docs/cli.md documents no field of {command} --json"
    return fields


def check_fields(test, out, fields):
    """Every documented field is there with its type; returns those that were null."""
    nulls = set()
    for name, (kind, nullable) in fields.items():
        parent, _, leaf = name.rpartition(".")
        if parent in nulls or any(name.startswith(n + ".") for n in nulls):
            continue  # inside an object this run did not measure
        holder = out
        for part in parent.split(".") if parent else []:
            holder = holder[part]
        test.assertIn(leaf, holder, f"documented field {name} missing")
        value = holder[leaf]
        if value is None:
            test.assertTrue(nullable, f"{name} is null but documented as {kind}")
            nulls.add(name)
            continue
        test.assertIsInstance(value, TYPES[kind], f"{name}: {value!r} is not {kind}")
        if kind in ("integer", "number"):
            test.assertNotIsInstance(value, bool, name)
    return nulls


class JsonOutputTest(unittest.TestCase):
    def test_info_json_holds_the_documented_fields(self):
        r = vitreg("info", MODEL, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)  # the object is all of stdout
        fields = documented_fields("info")
        self.assertEqual(check_fields(self, out, fields), {"quantization"})  # a float file's is null
        self.assertEqual(set(out), {f for f in fields if "." not in f}, "a top-level field is not documented")
        with tempfile.TemporaryDirectory() as tmp:  # a quantized file's is there
            quantized = os.path.join(tmp, "int8.safetensors")
            r = vitreg("convert", MODEL, quantized, "--dtype", "int8", "-q")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = vitreg("info", quantized, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            q = json.loads(r.stdout)
            self.assertEqual(check_fields(self, q, fields), set())
            self.assertEqual(q["quantization"], {"precision": "int8", "weight_bits": 8})
            self.assertEqual(q["config"]["dtype"], "I8")
        c = out["config"]
        self.assertEqual((c["dim"], c["depth"], c["heads"], c["patch_size"], c["num_registers"]), (192, 6, 3, 14, 4))
        self.assertEqual(c["head_dim"] * c["heads"], c["dim"])
        self.assertEqual(len(c["image_mean"]), 3)
        self.assertTrue(os.path.samefile(out["file"], os.path.join(ROOT, "weights", MODEL + ".safetensors")))
        self.assertEqual(out["metadata"]["trained"], "false")

    def check_bench(self, out):
        fields = documented_fields("bench")
        nulls = check_fields(self, out, fields)
        self.assertEqual(set(out), {f for f in fields if "." not in f}, "a top-level field is not documented")
        for name in ("peak", "vs_fp32"):
            if out[name] is not None:
                documented = {f.split(".", 1)[1] for f in fields if f.startswith(name + ".")}
                self.assertEqual(set(out[name]), documented, f"a field of {name} is not documented")
        t = out["ms_per_image"]
        self.assertTrue(0 < t["min"] <= t["median"] <= t["p95"] <= t["max"], t)
        self.assertAlmostEqual(out["gflops_per_second"], out["gflop_per_image"] / (t["median"] / 1e3),
                               delta=1e-6 * out["gflops_per_second"])
        self.assertEqual((out["height"], out["width"], out["batch"], out["threads"]), (56, 84, 2, 1))
        # The profile's stages, in forward order, add up to the timed forwards (their mean, within
        # the time between forwards: allocation, the clock itself).
        stages = ["embed", "norms", "qkv", "attention", "proj", "fc1", "mlp_activation", "fc2", "other"]
        self.assertEqual(list(out["profile"]), stages)
        self.assertTrue(all(v >= 0 for v in out["profile"].values()), out["profile"])
        self.assertGreater(out["profile"]["qkv"], 0)
        self.assertEqual(out["profile"]["mlp_activation"], 0)  # a GELU MLP: fused into fc1
        total = sum(out["profile"].values())
        self.assertLessEqual(total, t["max"] * 1.0001)
        self.assertGreater(total, 0.5 * t["min"])
        return nulls

    def test_bench_json_fp32_with_peak(self):
        r = vitreg("bench", MODEL, "--json", "--size", "56x84", "--batch", "2", "--threads", "1", "--iters", "3",
                   "--warmup", "0", "--peak")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(self.check_bench(out), {"vs_fp32", "vs_fp32_skipped"})
        self.assertEqual((out["precision"], out["inputs"], out["iters"], out["probe"]), ("fp32", "random", 3, False))
        self.assertGreater(out["load_seconds"], 0)
        self.assertGreater(out["peak_rss_mb"], 10)
        p = out["peak"]
        self.assertGreater(p["kernel_peak_gflops"], 0)
        # vpdpwssd and the 256-bit vpdpbusd: measured where the CPU has VNNI, 0 where it has not
        with open("/proc/cpuinfo") as f:
            flags = set(f.read().split())
        vnni = bool({"avx512_vnni", "avx_vnni"} & flags)
        self.assertEqual(p["int16_gops"] > 0, vnni, p)
        self.assertEqual(p["int8_256_gops"] > 0, vnni and ("avx_vnni" in flags or "avx512vl" in flags), p)
        self.assertEqual(p["int16_instruction"].startswith("vpdpwssd ("), vnni, p)
        self.assertEqual([t["precision"] for t in p["linears"]], ["fp32"])
        self.assertEqual(set(p["linears"][0]["layers"]), {"qkv", "proj", "fc1", "fc2"})
        self.assertGreater(p["forward_fraction_of_peak"], 0)

    def test_bench_json_int8_states_its_error(self):
        r = vitreg("bench", MODEL, "--json", "--size", "56x84", "--batch", "2", "--threads", "1", "--iters", "2",
                   "--warmup", "0", "--precision", "int8", "--images", IMAGE, IMAGE)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(self.check_bench(out), {"peak", "vs_fp32_skipped"})
        self.assertEqual(out["inputs"], "images")
        self.assertTrue(out["precision"].startswith("int8"), out["precision"])
        self.assertGreater(out["vs_fp32"]["cls_cosine_min"], 0.99)
        self.assertLess(out["vs_fp32"]["max_relative_error"], 0.1)

    def test_bench_keeps_its_times_where_fp32_does_not_fit(self):
        # A cap that admits the model @bf16 but not its fp32 weights beside it (the 7B's case at
        # 24 GB): the times stay, the comparison is skipped and says why.
        r = vitreg("info", MODEL, "--json")
        f32 = json.loads(r.stdout)["weight_bytes"]["f32"]
        refusal = vitreg("bench", MODEL, "--precision", "bf16", "--max-memory", "1M").stderr
        bf16_mb = int(re.search(r"bf16 (\d+) MB", refusal).group(1))
        cap = str((bf16_mb + 1) * 2**20 + f32 // 2)  # bf16's estimate + less than the fp32 weights
        r = vitreg("bench", MODEL, "--json", "--size", "56x84", "--batch", "2", "--threads", "1", "--iters", "1",
                   "--warmup", "0", "--precision", "bf16", "--max-memory", cap)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(self.check_bench(out), {"peak", "vs_fp32"})
        self.assertIn("does not fit beside this one", out["vs_fp32_skipped"])
        self.assertIn("--max-memory", out["vs_fp32_skipped"])
        self.assertGreater(out["ms_per_image"]["median"], 0)
        # without the cap the comparison runs (so the cap above is what skipped it)
        r = vitreg("bench", MODEL, "--json", "--size", "56x84", "--batch", "2", "--threads", "1", "--iters", "1",
                   "--warmup", "0", "--precision", "bf16")
        self.assertIsNotNone(json.loads(r.stdout)["vs_fp32"])


class QuietTest(unittest.TestCase):
    def test_every_subcommand_takes_quiet(self):
        listed = vitreg("--help").stdout.split("Subcommands:\n", 1)[1]
        names = re.findall(r"^  (\S+)", listed, re.M)
        self.assertIn("extract", names)
        for name in names:
            self.assertIn("-q,--quiet", vitreg(name, "--help").stdout, name)

    def test_quiet_success_prints_nothing_on_stderr(self):
        with tempfile.TemporaryDirectory(prefix="vitreg-quiet-") as tmp:
            loud = vitreg("extract", MODEL, IMAGE, "-o", os.path.join(tmp, "loud"))
            self.assertEqual(loud.returncode, 0, loud.stderr)
            self.assertIn("written to", loud.stderr)
            quiet = vitreg("extract", MODEL, IMAGE, "-o", os.path.join(tmp, "quiet"), "--quiet")
            self.assertEqual(quiet.returncode, 0, quiet.stderr)
            self.assertEqual(quiet.stderr, "")
            self.assertTrue(os.path.isfile(os.path.join(tmp, "quiet", "cls.npy")))

    def test_quiet_still_prints_errors(self):
        r = vitreg("info", os.path.join(ROOT, "no-such-model.safetensors"), "-q")
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("vitreg: "), r.stderr)
        self.assertIn("no-such-model", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
