#!/usr/bin/env python3
"""Do two fixture trees hold the same numbers?

    fixtures_match.py REGENERATED CHECKED_IN [--exclude NAME ...]

Float64 sums come out in another order on another instruction set (AVX2 against AVX-512, or
another BLAS kernel), so regenerated fixtures may differ in the last bits from the checked-in
ones. This compares what the files mean, with a tolerance that summation order cannot break
and that a real change in the reference still does:
  - JSON: the same structure, strings, booleans and integers; floats within a relative 1e-12
    (float64 text) of each other;
  - safetensors: the same header (names, dtypes, shapes, metadata), integer tensors exactly,
    float tensors within a few units in the last place of their dtype, relative to each
    tensor's largest value;
  - torch.save files (.pt/.pth): loaded with torch (weights only; a TorchScript archive through
    its state dict) and compared as tensors;
  - everything else (PNG images of integer pixels, scripts, text): byte for byte.
Prints each difference and exits 1 if there is any.
"""
import argparse
import json
import math
import os
import struct
import sys
import warnings

import numpy as np

FLOAT_JSON_RTOL = 1e-12
FLOAT_JSON_ATOL = 1e-14  # sums that are zero in exact arithmetic land anywhere near 0
# Units in the last place allowed per float dtype, relative to the tensor's largest |value|.
ULPS = 8
DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_, "BF16": np.uint16}


def json_diff(a, b, where):
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return [] if a is b or a == b and type(a) is type(b) else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return [] if a == b else [f"{where}: {a} != {b}"]
        if math.isnan(a) and math.isnan(b):
            return []
        ok = math.isclose(a, b, rel_tol=FLOAT_JSON_RTOL, abs_tol=FLOAT_JSON_ATOL)
        return [] if ok else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a.keys() ^ b.keys())} in one only"]
        return [d for k in a for d in json_diff(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in json_diff(x, y, f"{where}[{i}]")]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} != {b!r}"]


def float_diff(a, b, eps, where):
    """Float arrays of one shape within ULPS·eps of the reference's largest |value|."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return [f"{where}: shape {a.shape} != {b.shape}"]
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return [f"{where}: NaNs in other places"]
    a, b = np.nan_to_num(a, nan=0.0), np.nan_to_num(b, nan=0.0)
    scale = float(np.max(np.abs(b), initial=0.0))
    worst = float(np.max(np.abs(a - b), initial=0.0))
    limit = ULPS * eps * max(scale, np.finfo(np.float32).tiny)
    return [] if worst <= limit else [f"{where}: max |Δ| {worst:.3e} > {limit:.3e} (largest |value| {scale:.3e})"]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def safetensors_diff(a_path, b_path, where):
    ha, da = read_safetensors(a_path)
    hb, db = read_safetensors(b_path)
    strip = lambda h: {k: ({**v, "data_offsets": None} if k != "__metadata__" else v) for k, v in h.items()}
    if strip(ha) != strip(hb):
        return [f"{where}: headers differ"]
    out = []
    for name, info in ha.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        (a0, a1), (b0, b1) = info["data_offsets"], hb[name]["data_offsets"]
        ra, rb = da[a0:a1], db[b0:b1]
        if dtype not in DTYPES:
            out += [] if ra == rb else [f"{where}:{name}: {dtype} bytes differ"]
            continue
        va, vb = np.frombuffer(ra, DTYPES[dtype]), np.frombuffer(rb, DTYPES[dtype])
        if dtype == "BF16":  # the top half of a float32
            va = (va.astype(np.uint32) << 16).view(np.float32)
            vb = (vb.astype(np.uint32) << 16).view(np.float32)
            out += float_diff(va, vb, 2.0 ** -7, f"{where}:{name}")
        elif np.issubdtype(DTYPES[dtype], np.floating):
            out += float_diff(va, vb, float(np.finfo(DTYPES[dtype]).eps), f"{where}:{name}")
        elif not np.array_equal(va, vb):
            out.append(f"{where}:{name}: {dtype} values differ")
    return out


def torch_diff(a_path, b_path, where):
    import torch

    def flat(obj, prefix=""):
        if isinstance(obj, torch.Tensor):
            yield prefix, obj
        elif hasattr(obj, "state_dict") and callable(obj.state_dict):  # a TorchScript module
            yield from flat(dict(obj.state_dict()), f"{prefix}{type(obj).__name__}:{getattr(obj, 'original_name', '')}")
        elif isinstance(obj, dict):
            for k, v in obj.items():
                yield from flat(v, f"{prefix}.{k}" if prefix else str(k))
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                yield from flat(v, f"{prefix}[{i}]")
        else:
            yield prefix, obj

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "looks like a TorchScript archive": it is one, on purpose
            a = dict(flat(torch.load(a_path, map_location="cpu", weights_only=True)))
            b = dict(flat(torch.load(b_path, map_location="cpu", weights_only=True)))
    except Exception:  # not a plain state dict (a TorchScript or legacy fixture): its bytes
        return bytes_diff(a_path, b_path, where)
    if a.keys() != b.keys():
        return [f"{where}: entries {sorted(a.keys() ^ b.keys())} in one only"]
    out = []
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.dtype != y.dtype or x.shape != y.shape:
                out.append(f"{where}:{k}: {x.dtype}{list(x.shape)} != {y.dtype}{list(y.shape)}")
            elif x.is_floating_point():
                out += float_diff(x.double().numpy(), y.double().numpy(), torch.finfo(x.dtype).eps, f"{where}:{k}")
            elif not torch.equal(x, y):
                out.append(f"{where}:{k}: values differ")
        elif x != y:
            out.append(f"{where}:{k}: {x!r} != {y!r}")
    return out


def bytes_diff(a_path, b_path, where):
    with open(a_path, "rb") as fa, open(b_path, "rb") as fb:
        return [] if fa.read() == fb.read() else [f"{where}: bytes differ"]


def file_diff(a_path, b_path, where):
    ext = os.path.splitext(a_path)[1].lower()
    if ext == ".json":
        with open(a_path) as fa, open(b_path) as fb:
            return json_diff(json.load(fa), json.load(fb), where)
    if ext == ".safetensors":
        return safetensors_diff(a_path, b_path, where)
    if ext in (".pt", ".pth"):
        return torch_diff(a_path, b_path, where)
    return bytes_diff(a_path, b_path, where)


def tree(root, exclude):
    files = set()
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in exclude]
        files |= {os.path.relpath(os.path.join(d, n), root) for n in names if n not in exclude}
    return files


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("regenerated")
    p.add_argument("checked_in")
    p.add_argument("--exclude", action="append", default=[], help="a file or folder name to skip (repeatable)")
    args = p.parse_args()
    a, b = tree(args.regenerated, set(args.exclude)), tree(args.checked_in, set(args.exclude))
    problems = [f"{f}: only in {args.regenerated}" for f in sorted(a - b)]
    problems += [f"{f}: only in {args.checked_in}" for f in sorted(b - a)]
    for f in sorted(a & b):
        problems += file_diff(os.path.join(args.regenerated, f), os.path.join(args.checked_in, f), f)
    for line in problems:
        print(line)
    print(f"{len(a & b)} files compared, {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
