#!/usr/bin/env python3
"""Batches that survive faults (issue #8): a folder of 2,000 small images of which 5% are broken
in different ways; runs killed with SIGKILL at random moments and resumed; each hard limit
refused with the file and the limit named; sharded runs merged.

usage: reliability_test.py VITREG_BINARY REPO_ROOT
"""
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from file_tree import read_bytes, tree  # noqa: E402
from png_util import encode_png  # noqa: E402

VITREG, ROOT = sys.argv[1], sys.argv[2]
MODEL = "vitreg-untrained-s14-d192-reg4"
OTHER_MODEL = "vitreg-fmnist-softmax"
# Root reads any file, so the batch runs as `nobody` for permissions to mean something.
USER = 65534 if os.geteuid() == 0 else None
SANDBOX = None  # see setUpModule
SIDE = 28  # 2x2 patches: the batch is about files, not about compute
COMMON = ["--resize", "none", "--threads", "2", "--batch", "16"]


def setUpModule():
    """An unprivileged user may not enter the checkout (a clone under root's 0700 home, say), so
    the binary and the checkpoints it runs are copied where that user can read them."""
    global VITREG, SANDBOX
    if USER is None:
        return
    SANDBOX = tempfile.mkdtemp(prefix="vitreg-unprivileged-")
    os.chmod(SANDBOX, 0o755)
    binary = os.path.join(SANDBOX, "vitreg")
    shutil.copy2(VITREG, binary)
    weights = os.path.join(SANDBOX, "weights")
    os.makedirs(weights)
    for name in (MODEL, OTHER_MODEL):
        shutil.copy2(os.path.join(ROOT, "weights", name + ".safetensors"), weights)
    for base, dirs, files in os.walk(SANDBOX):
        for n in dirs + files:
            os.chmod(os.path.join(base, n), 0o755)
    VITREG = binary
    os.environ["VITREG_WEIGHTS"] = weights  # found before the source tree's weights/


def tearDownModule():
    if SANDBOX:
        shutil.rmtree(SANDBOX, ignore_errors=True)


def as_user(cmd, user):
    """`cmd` run as `user` (None: as this process's user)."""
    if user is None:
        return list(cmd)
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]


def vitreg(*args, user=None):
    return subprocess.run(as_user([VITREG, *args], user), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=900)


def manifest(out):
    with open(os.path.join(out, "manifest.jsonl")) as f:
        return [json.loads(line) for line in f]


def good_png(seed):
    rng = np.random.default_rng(seed)
    return encode_png(SIDE, SIDE, rng.integers(0, 256, SIDE * SIDE * 3, dtype=np.uint8).tobytes())


# The broken kinds, each (file name suffix, how to make it, what the reason must mention).
def _truncated_png(d, name, i):
    with open(os.path.join(d, name), "wb") as f:
        f.write(good_png(i)[:60])


def _zero_bytes(d, name, i):
    open(os.path.join(d, name), "wb").close()


def _wrong_extension(d, name, i):  # a text file named like an image
    with open(os.path.join(d, name), "w") as f:
        f.write("this is not an image\n")


def _unsupported(d, name, i):  # a TIFF header: a real format stb does not read
    with open(os.path.join(d, name), "wb") as f:
        f.write(b"II*\x00" + bytes(200))


def _unreadable(d, name, i):
    with open(os.path.join(d, name), "wb") as f:
        f.write(good_png(i))
    os.chmod(os.path.join(d, name), 0)


def _directory(d, name, i):
    os.makedirs(os.path.join(d, name))


def _huge(d, name, i):  # a 30000x30000 header over a few bytes of pixels
    with open(os.path.join(d, name), "wb") as f:
        f.write(encode_png(2, 2, bytes(12), declared=(30000, 30000)))


def _truncated_jpeg(d, name, i):
    with open(os.path.join(ROOT, "assets", "images", "coffee.jpg"), "rb") as f:
        data = f.read()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data[: len(data) // 4])


BROKEN = [
    (".png", _truncated_png, "cannot decode"),
    (".jpg", _zero_bytes, "empty file"),
    (".jpg", _wrong_extension, "not a decodable image"),
    (".png", _unsupported, "not a decodable image"),
    (".png", _unreadable, "Permission denied"),
    (".jpg", _directory, "is a directory"),
    (".png", _huge, "over the limit of"),
    (".jpg", _truncated_jpeg, "truncated JPEG"),
]


class Reliability(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-reliability-")
        os.chmod(cls.tmp, 0o777)
        cls.user = USER
        cls.images = os.path.join(cls.tmp, "images")
        os.makedirs(cls.images)
        rng = random.Random(8)
        broken = set(rng.sample(range(2000), 100))  # 5%
        cls.expected_bad = {}
        for i in range(2000):
            if i in broken:
                suffix, make, reason = BROKEN[len(cls.expected_bad) % len(BROKEN)]
                name = f"img{i:05d}{suffix}"
                make(cls.images, name, i)
                cls.expected_bad[os.path.join(cls.images, name)] = reason
            else:
                with open(os.path.join(cls.images, f"img{i:05d}.png"), "wb") as f:
                    f.write(good_png(i))
        os.chmod(cls.images, 0o777)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def out(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o777)
        return path

    def extract(self, out, *extra, inputs=None):
        return vitreg("extract", MODEL, *(inputs or [self.images]), "-o", out, *COMMON, *extra, user=self.user)

    def test_broken_inputs_are_recorded_and_the_good_ones_land(self):
        out = self.out("faults")
        r = self.extract(out, "--chunk", "128")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("100 inputs failed", r.stderr)
        rows = manifest(out)
        self.assertEqual(len(rows), 2000)
        self.assertEqual(rows, sorted(rows, key=lambda x: x["path"]))
        bad = {row["path"]: row for row in rows if row["status"] == "error"}
        self.assertEqual(set(bad), set(self.expected_bad))
        for path, reason in self.expected_bad.items():
            self.assertIn(reason, bad[path]["error"], path)
            self.assertIn(path, bad[path]["error"])
        ok = [row for row in rows if row["status"] == "ok"]
        self.assertEqual([row["row"] for row in ok], list(range(1900)))
        cls_ = np.load(os.path.join(out, "cls.npy"))
        self.assertEqual(cls_.shape, (1900, 192))
        # Exactly the good ones, with the features a run over only them gives.
        listing = os.path.join(self.tmp, "good.txt")
        with open(listing, "w") as f:
            f.write("".join(row["path"] + "\n" for row in ok))
        good = self.out("good-only")
        r = self.extract(good, inputs=["@" + listing])
        self.assertEqual(r.returncode, 0, r.stderr)
        np.testing.assert_array_equal(np.load(os.path.join(good, "cls.npy")), cls_)
        np.testing.assert_array_equal(np.load(os.path.join(good, "registers.npy")),
                                      np.load(os.path.join(out, "registers.npy")))

    def kill_and_resume(self, command, *options, inputs=None, name=None):
        """`command` over the batch (or `inputs`), SIGKILLed at random moments and resumed, ends
        byte-identical to an uninterrupted run; resuming a finished run changes nothing."""
        inputs, name = inputs or [self.images], name or command

        def run(out):
            return vitreg(command, MODEL, *inputs, "-o", out, *COMMON, *options, "--resume", user=self.user)

        whole = self.out(name + "-whole")
        t0 = time.monotonic()
        r = run(whole)
        duration = time.monotonic() - t0
        self.assertEqual(r.returncode, 3, r.stderr)
        expected = tree(whole)

        out = self.out(name + "-killed")
        chunks_dir = os.path.join(out, "chunks")

        def finished_chunks():
            names = os.listdir(chunks_dir) if os.path.isdir(chunks_dir) else []
            return sum(".tmp." not in n for n in names)

        # Each attempt is killed after it has finished 1 to 3 more chunks, at a random moment within the
        # next chunk: driven by progress, not by the clock, so a faster or busier machine still sees kills.
        rng = random.Random(1)
        per_chunk = duration / 32
        kills, chunks_seen = 0, []
        for attempt in range(4):
            target = min(finished_chunks() + rng.randint(1, 3), 30)
            cmd = as_user([VITREG, command, MODEL, *inputs, "-o", out, *COMMON, *options, "--resume"], self.user)
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while p.poll() is None and finished_chunks() < target:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.9) * per_chunk)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
            p.wait()
            chunks_seen.append(finished_chunks())
        print(f"\n{command} kill/resume: uninterrupted run {duration:.2f} s; {kills} SIGKILLs; finished chunks after "
              f"each attempt {chunks_seen} of 32", file=sys.stderr)
        self.assertGreaterEqual(kills, 2, "the runs finished before they could be killed")
        r = run(out)
        self.assertEqual(r.returncode, 3, r.stderr)
        got = tree(out)
        self.assertEqual(sorted(got), sorted(expected))
        for name in expected:
            self.assertEqual(got[name], expected[name], name)
        r = run(out)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(tree(out), expected)
        return expected

    def test_killed_runs_resume_to_the_uninterrupted_result(self):
        self.kill_and_resume("extract", "--chunk", "64", "--patch-tokens")

    def test_killed_runs_over_tar_shards_resume_mid_shard_to_the_uninterrupted_result(self):
        # The batch's files as two webdataset shards of 1000 samples, one gzipped: chunks of 64
        # end inside shards, so each resume skips into the middle of a stream.
        names = sorted(os.listdir(self.images))
        samples = sum(os.path.isfile(os.path.join(self.images, n)) for n in names)  # not the folders
        shards = []
        for k, (suffix, mode) in enumerate([(".tar", "w"), (".tar.gz", "w:gz")]):
            shards.append(os.path.join(self.tmp, f"{k:05d}{suffix}"))
            with tarfile.open(shards[-1], mode) as tar:
                for n in names[k * 1000:(k + 1) * 1000]:
                    if os.path.isfile(os.path.join(self.images, n)):
                        tar.add(os.path.join(self.images, n), arcname=n)
                        info = tarfile.TarInfo(n.split(".")[0] + ".json")
                        meta = json.dumps({"name": n}).encode()
                        info.size = len(meta)
                        tar.addfile(info, io.BytesIO(meta))
            os.chmod(shards[-1], 0o644)
        files = self.kill_and_resume("extract", "--chunk", "64", inputs=shards, name="shards")
        rows = [json.loads(line) for line in files["manifest.jsonl"].decode().splitlines()]
        self.assertEqual(len(rows), samples)
        for r in rows:
            self.assertTrue(r["metadata"]["name"].startswith(r["key"] + "."), r)
        self.assertEqual([r["path"] for r in rows[:3]], [shards[0]] * 3)

    def test_killed_dense_runs_resume_to_the_uninterrupted_result(self):
        files = self.kill_and_resume("dense", "--chunk", "64", "--pca", "--layers", "-2,-1")
        self.assertEqual(sum(n.endswith(".pca.png") for n in files), 1900)
        self.assertEqual(sum(n.endswith(".npy") for n in files), 1900)

    def test_an_output_folder_of_another_job_is_refused(self):
        out = self.out("refuse")
        few = [os.path.join(self.images, n) for n in sorted(os.listdir(self.images))[:40]]
        r = self.extract(out, inputs=few)
        self.assertIn(r.returncode, (0, 3), r.stderr)
        before = tree(out, skip=())
        other = ["--resize", "short:28", "--threads", "2", "--resume"]
        for args, what in ((COMMON, "--resume"), (other, "resize: \"none\" -> \"short:28\"")):
            r = vitreg("extract", MODEL, *few, "-o", out, *args, user=self.user)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(out, r.stderr)
            self.assertIn(what, r.stderr)
            self.assertEqual(tree(out, skip=()), before)
        r = vitreg("extract", OTHER_MODEL, *few, "-o", out, *COMMON, "--resume", user=self.user)
        self.assertEqual(r.returncode, 1)
        self.assertIn("model_digest", r.stderr)

    def test_sharded_runs_merge_to_the_single_run(self):
        names = sorted(os.listdir(self.images))[:40]
        paths = [os.path.join(self.images, n) for n in names]
        single = self.out("single")
        r = self.extract(single, "--patch-tokens", "--chunk", "8", inputs=paths)
        self.assertIn(r.returncode, (0, 3), r.stderr)
        sharded = self.out("sharded")
        shuffled = paths[:]
        random.Random(3).shuffle(shuffled)
        listing = os.path.join(self.tmp, "shuffled.txt")
        with open(listing, "w") as f:
            f.write("\n".join(shuffled) + "\n")
        for k in (0, 1, 3):
            # A shard takes the same files whatever order the list is in.
            r = self.extract(sharded, "--patch-tokens", "--chunk", "8", "--shard", f"{k}/4",
                             inputs=[*paths] if k != 1 else ["@" + listing])
            self.assertIn(r.returncode, (0, 3), r.stderr)
        r = vitreg("merge", sharded, user=self.user)
        self.assertEqual(r.returncode, 1)
        self.assertIn("shard 2 of 4: missing", r.stderr)
        self.assertIn("shard 1 of 4: ran another", r.stderr)  # shuffled list: another input order
        r = self.extract(sharded, "--patch-tokens", "--chunk", "8", "--shard", "1/4", "--overwrite", inputs=paths)
        self.assertIn(r.returncode, (0, 3), r.stderr)
        env_run = subprocess.run(
            as_user([VITREG, "extract", MODEL, *paths, "-o", sharded, *COMMON, "--patch-tokens", "--chunk", "8",
                     "--shard", "auto"], self.user),
            env={**os.environ, "SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4"},
            capture_output=True, text=True, stdin=subprocess.DEVNULL)
        self.assertIn(env_run.returncode, (0, 3), env_run.stderr)
        self.assertTrue(os.path.isdir(os.path.join(sharded, "shard-2-of-4")))
        r = vitreg("merge", sharded, user=self.user)
        self.assertIn(r.returncode, (0, 3), r.stderr)
        expected = tree(single)
        got = tree(sharded)
        for name in [n for n in expected if not n.startswith("chunks/")]:
            self.assertEqual(got.get(name), expected[name], name)


    def test_sharded_dense_runs_merge_to_the_single_run(self):
        names = sorted(os.listdir(self.images))[:60]
        paths = [os.path.join(self.images, n) for n in names]
        broken = [p for p in paths if p in self.expected_bad]
        self.assertGreater(len(broken), 0, "the shards must meet broken inputs")
        dense = ["--chunk", "4", "--pca", "--format", "safetensors", "--dtype", "f16"]
        single = self.out("dense-single")
        r = vitreg("dense", MODEL, *paths, "-o", single, *COMMON, *dense, user=self.user)
        self.assertEqual(r.returncode, 3, r.stderr)
        sharded = self.out("dense-sharded")
        for k in range(3):
            r = vitreg("dense", MODEL, *paths, "-o", sharded, *COMMON, *dense, "--shard", f"{k}/3", user=self.user)
            self.assertIn(r.returncode, (0, 3), r.stderr)
        # A shard of another command in the same split is refused by merge, naming the difference.
        r = vitreg("extract", MODEL, *paths, "-o", sharded, *COMMON, "--chunk", "4", "--format", "safetensors",
                   "--shard", "1/3", "--overwrite", user=self.user)
        self.assertIn(r.returncode, (0, 3), r.stderr)
        r = vitreg("merge", sharded, user=self.user)
        self.assertEqual(r.returncode, 1)
        self.assertIn("shard 1 of 3: ran another command", r.stderr)
        self.assertIn('job: "vitreg dense" -> "vitreg extract"', r.stderr)
        self.assertFalse(os.path.exists(os.path.join(sharded, "manifest.jsonl")))
        r = vitreg("dense", MODEL, *paths, "-o", sharded, *COMMON, *dense, "--shard", "1/3", "--overwrite", user=self.user)
        self.assertIn(r.returncode, (0, 3), r.stderr)
        r = vitreg("merge", sharded, user=self.user)
        self.assertEqual(r.returncode, 3, r.stderr)
        expected, got = tree(single), tree(sharded)
        compared = [n for n in expected if not n.startswith("chunks/")]
        self.assertEqual(sum(n.endswith(".pca.png") for n in compared), len(paths) - len(broken))
        for name in compared:
            self.assertEqual(got.get(name), expected[name], name)
        # A joint PCA depends on which images share a batch: it is not sharded.
        r = vitreg("dense", MODEL, *paths, "-o", self.out("joint"), *COMMON, "--pca-joint", "--shard", "0/2", user=self.user)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--pca-joint", r.stderr)


class Limits(unittest.TestCase):
    """Each hard limit refuses with the file and the limit named, exit 1 (or a failed row)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vitreg-limits-")
        cls.image = os.path.join(cls.tmp, "small.png")
        with open(cls.image, "wb") as f:
            f.write(good_png(1))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def checkpoint(self, header_pad):
        """A copy of a small fixture checkpoint whose header is padded by `header_pad` blanks."""
        data = read_bytes(os.path.join(ROOT, "tests", "fixtures", "models", "dinov2_f32.safetensors"))
        n = int.from_bytes(data[:8], "little")
        text = data[8:8 + n].rstrip() + b" " * header_pad
        text += b" " * (-len(text) % 8)
        path = os.path.join(self.tmp, "padded.safetensors")
        with open(path, "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text + data[8 + n:])
        return path

    def hf_config(self, deep):
        """A copy of the HF fixture whose config.json carries a value nested `deep` levels (under
        task_specific_params, a key transformers has and vitreg ignores: an unknown one is refused)."""
        folder = os.path.join(self.tmp, "hf")
        shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "models", "hf_reg2"), folder)
        config = json.loads(read_bytes(os.path.join(folder, "config.json")))
        config["task_specific_params"] = json.loads("[" * deep + "]" * deep)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        return os.path.join(folder, "config.json")

    def test_header_size_and_json_depth(self):
        for path, flag, value, words in (
                (self.checkpoint(header_pad=5000), "--max-header-bytes", "4096", "over the limit of 4096"),
                (self.hf_config(deep=40), "--max-json-depth", "16", "nesting deeper than 16")):
            r = subprocess.run([VITREG, "info", os.path.dirname(path) if path.endswith(".json") else path, flag, value],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, flag)
            self.assertIn(path, r.stderr)
            self.assertIn(words, r.stderr)
            model = os.path.dirname(path) if path.endswith(".json") else path
            self.assertEqual(subprocess.run([VITREG, "info", model], capture_output=True).returncode, 0)

    def test_pixels_and_tokens(self):
        for flag, value, words in (("--max-image-pixels", "700", "over the limit of 700 pixels"),
                                   ("--max-tokens", "8", "9 tokens, over the limit of 8")):
            out = os.path.join(self.tmp, "out" + flag)
            r = subprocess.run([VITREG, "extract", MODEL, self.image, "-o", out, "--resize", "none", flag, value],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 3, r.stderr)
            row = json.loads(read_bytes(os.path.join(out, "manifest.jsonl")).decode().splitlines()[0])
            self.assertIn(self.image, row["error"])
            self.assertIn(words, row["error"])
            r = subprocess.run([VITREG, "maps", MODEL, self.image, "-o", out + "-maps", "--resize", "none", flag, value],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn(self.image, r.stderr)
            self.assertIn(words, r.stderr)
            self.assertFalse(os.path.exists(out + "-maps"))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
