#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora into fuzz/seeds/: tiny checkpoints (a few KB, so the
fuzzer spends its time in headers and shapes, not in weight bytes) in every layout, dtype
and metadata variant vitreg reads, HF config.json files, small images in every format the
decoder takes, @list files, webdataset tar shards and shard-name patterns. Deterministic; needs only NumPy.
    fuzz/make_seeds.py [OUT_DIR]"""
import json
import os
import struct
import sys
import gzip
import io
import tarfile
import zlib

import numpy as np

D, HIDDEN, PATCH, GRID = 8, 16, 2, 2


def tensors(layout, registers=0, swiglu=False, sinks=False):
    rng = np.random.default_rng(len(layout) * 10 + registers + 2 * swiglu + 4 * sinks)
    t = {}
    npos = GRID * GRID + (0 if layout == "timm" else 1)
    t["cls_token"] = [1, 1, D]
    t["pos_embed"] = [1, npos, D]
    t["patch_embed.proj.weight"] = [D, 3, PATCH, PATCH]
    t["patch_embed.proj.bias"] = [D]
    if registers:
        t["reg_token" if layout == "timm" else "register_tokens"] = [1, registers, D]
    b = "blocks.0."
    for n in ("norm1", "norm2"):
        t[b + n + ".weight"] = [D]
        t[b + n + ".bias"] = [D]
    t[b + "attn.qkv.weight"] = [3 * D, D]
    t[b + "attn.qkv.bias"] = [3 * D]
    t[b + "attn.proj.weight"] = [D, D]
    t[b + "attn.proj.bias"] = [D]
    if sinks:
        t[b + "attn.sinks"] = [2]
    t[b + "ls1.gamma"] = [D]
    t[b + "ls2.gamma"] = [D]
    if swiglu:
        t[b + "mlp.w12.weight"] = [2 * HIDDEN, D]
        t[b + "mlp.w12.bias"] = [2 * HIDDEN]
        t[b + "mlp.w3.weight"] = [D, HIDDEN]
        t[b + "mlp.w3.bias"] = [D]
    else:
        t[b + "mlp.fc1.weight"] = [HIDDEN, D]
        t[b + "mlp.fc1.bias"] = [HIDDEN]
        t[b + "mlp.fc2.weight"] = [D, HIDDEN]
        t[b + "mlp.fc2.bias"] = [D]
    t["norm.weight"] = [D]
    t["norm.bias"] = [D]
    return {name: (rng.standard_normal(shape) * 0.3).astype(np.float32) for name, shape in t.items()}


HF_NAMES = [("cls_token", "embeddings.cls_token"), ("register_tokens", "embeddings.register_tokens"),
            ("pos_embed", "embeddings.position_embeddings"),
            ("patch_embed.proj.", "embeddings.patch_embeddings.projection."),
            ("norm.", "layernorm.")]
HF_BLOCK = [("attn.proj.", "attention.output.dense."), ("ls1.gamma", "layer_scale1.lambda1"),
            ("ls2.gamma", "layer_scale2.lambda1"), ("mlp.w12.", "mlp.weights_in."), ("mlp.w3.", "mlp.weights_out.")]


def to_hf(t):
    out = {}
    for name, v in t.items():
        if name.startswith("blocks.0."):
            rest = name[len("blocks.0."):]
            if rest.startswith("attn.qkv."):
                kind = rest.split(".")[-1]
                for i, part in enumerate(("query", "key", "value")):
                    out[f"encoder.layer.0.attention.attention.{part}.{kind}"] = v[i * D:(i + 1) * D]
                continue
            for a, h in HF_BLOCK:
                if rest.startswith(a):
                    rest = h + rest[len(a):]
                    break
            out["encoder.layer.0." + rest] = v
            continue
        for a, h in HF_NAMES:
            if name.startswith(a):
                name = h + name[len(a):]
                break
        out[name] = v
    return out


def safetensors_bytes(t, dtype="F32", metadata=None):
    header, blobs, offset = {}, [], 0
    for name in sorted(t):
        a = t[name].astype(np.float32)
        if dtype == "F16":
            raw = a.astype(np.float16).tobytes()
        elif dtype == "BF16":
            raw = (a.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        else:
            raw = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


QUANTIZED = ("patch_embed.proj.weight", ".attn.qkv.weight", ".attn.proj.weight", ".mlp.fc1.weight", ".mlp.fc2.weight",
             ".mlp.w12.weight", ".mlp.w3.weight")


def bf16(a):
    """bf16 bits of float32 values (truncated; any rounding makes a valid file)."""
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def int4_tensors(name, rows, shape):
    """--dtype int4's layout of one weight [out, in] of `shape`: U8 codes two a byte (the even input low; `shape`
    with its last dim halved), BF16 scale and zero per group of 128 inputs."""
    out_dim, in_dim = rows.shape
    codes = np.zeros((out_dim, in_dim + in_dim % 2), np.uint8)
    scale, zero = [], []
    for g in range(0, in_dim, 128):
        w = rows[:, g:g + 128]
        s = bf16(np.maximum((w.max(axis=1) - w.min(axis=1)) / 15, 1e-6))
        z = bf16(w.min(axis=1) + 8 * (s.astype(np.uint32) << 16).view(np.float32))
        sf, zf = (s.astype(np.uint32) << 16).view(np.float32), (z.astype(np.uint32) << 16).view(np.float32)
        codes[:, g:g + w.shape[1]] = np.clip(np.rint((w - (zf - 8 * sf)[:, None]) / sf[:, None]), 0, 15)
        scale.append(s)
        zero.append(z)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return {name: ("U8", shape[:-1] + ((shape[-1] + 1) // 2,), packed.tobytes()),
            name + ".scale": ("BF16", (out_dim, len(scale)), np.stack(scale, 1).tobytes()),
            name + ".zero": ("BF16", (out_dim, len(zero)), np.stack(zero, 1).tobytes())}


def quantized_bytes(t, bits=8, metadata=None):
    """vitreg convert --dtype int8's layout: the linears' weights I8 beside an F32 scale and an I32 row sum per output
    channel (bits 4: --dtype int4's, int4_tensors)."""
    qmax = np.float32(2 ** (bits - 1) - 1)
    header, blobs, offset = {}, [], 0
    out = {}
    for name in sorted(t):
        a = t[name].astype(np.float32)
        if not name.endswith(QUANTIZED):
            out[name] = ("F32", a.shape, a.tobytes())
            continue
        rows = a.reshape(a.shape[0], -1)
        if bits == 4:
            out.update(int4_tensors(name, rows, a.shape))
            continue
        scale = np.abs(rows).max(axis=1) / qmax
        scale[scale == 0] = 1
        q = np.clip(np.rint(rows / scale[:, None]), -qmax, qmax).astype(np.int8)
        out[name] = ("I8", a.shape, q.tobytes())
        out[name + ".scale"] = ("F32", scale.shape, scale.astype(np.float32).tobytes())
        sums = q.astype(np.int32).sum(axis=1, dtype=np.int32)
        out[name + ".sums"] = ("I32", sums.shape, sums.tobytes())
    for name in sorted(out):
        dtype, shape, raw = out[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = dict(metadata or {}, heads="2", quantization="int4" if bits == 4 else "int8",
                                  weight_bits=str(bits), source_digest="fnv1a64:0123456789abcdef",
                                  **({"group_size": "128"} if bits == 4 else {}))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def png_file(w, h, bit_depth, color, raw, extra=b""):
    """A PNG of filtered rows `raw` (each led by its filter byte), `extra` chunks before IDAT."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color, 0, 0, 0)) +
            (chunk(b"PLTE", extra) if extra else b"") + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def png_bytes(w, h, channels, bit_depth=8, seed=0):
    rng = np.random.default_rng(seed)
    dtype = ">u2" if bit_depth == 16 else np.uint8
    pixels = rng.integers(0, 2 ** bit_depth, size=(h, w, channels)).astype(dtype)
    color = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    return png_file(w, h, bit_depth, color, b"".join(b"\0" + pixels[y].tobytes() for y in range(h)))


def label_png(labels, palette=None):
    """A label mask: palette indices with `palette` (RGB triples, VOC's SegmentationClass), else grey levels."""
    labels = np.asarray(labels, np.uint8)
    h, w = labels.shape
    raw = b"".join(b"\0" + labels[y].tobytes() for y in range(h))
    return png_file(w, h, 8, 3 if palette else 0, raw, bytes(np.asarray(palette, np.uint8).ravel()) if palette else b"")


def tree(paths, contents=()):
    """A folder-reader input (fuzz/fuzz_files.hpp, make_tree): the listing, then the files' bytes."""
    listing = "\n".join(paths).encode()
    return listing + (b"\n\n" + b"\n--\n".join(contents) if contents else b"")


def npy_bytes(a):
    """A .npy (version 1.0) of `a`, as numpy.save writes it."""
    import io
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def npz_bytes(a, compressed):
    import io
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, disparity=a)
    return buf.getvalue()


def bmp_bytes(w, h):
    row = (3 * w + 3) & ~3
    pixels = bytes((x * 37 + y * 11) % 256 for y in range(h) for x in range(row))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


def jpeg_bytes():
    """A 16×8 baseline JPEG with 4:2:0 chroma, by PIL (the only seed that needs it)."""
    import io
    from PIL import Image
    rgb = np.stack(np.meshgrid(np.arange(16) * 15, np.arange(8) * 30) + [np.full((8, 16), 90)], -1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=80)
    return buf.getvalue()


def webp_bytes(kind):
    """Tiny WebP files by PIL (libwebp): lossy, lossless with alpha, a 2-frame animation."""
    import io
    from PIL import Image
    rgb = np.stack(np.meshgrid(np.arange(8) * 30, np.arange(6) * 40) + [np.full((6, 8), 90)], -1).astype(np.uint8)
    im = Image.fromarray(rgb)
    buf = io.BytesIO()
    if kind == "lossy":
        im.save(buf, format="WEBP", quality=60)
    elif kind == "lossless_alpha":
        rgba = np.concatenate([rgb, np.full((6, 8, 1), 128, np.uint8)], -1)
        rgba[::2, ::3, 3] = 0
        Image.fromarray(rgba, "RGBA").save(buf, format="WEBP", lossless=True)
    else:
        im.save(buf, format="WEBP", save_all=True, append_images=[im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)],
                duration=100, quality=50)
    return buf.getvalue()


def tar_bytes(members, compress=False):
    """A webdataset shard: (name, bytes) members as tarfile writes them, fixed times and owners."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0) if compress else buf.getvalue()


def webdataset_seeds(put):
    jpg = jpeg_bytes()
    sample = [("000.jpg", jpg), ("000.json", b'{"url": "x"}'), ("000.txt", b"a caption")]
    put("webdataset", "sample.tar", tar_bytes(sample + [("001.png", png_bytes(3, 2, 3, seed=5)), ("002.cls", b"1")]))
    put("webdataset", "faults.tar", tar_bytes([("../up.jpg", jpg), ("/abs.webp", b"RIFF"), ("a/b.c.jpg", jpg),
                                               ("a/b.c.png", jpg), ("000.jpg", jpg), ("000.jpg", jpg)]))
    put("webdataset", "sample.tar.gz", tar_bytes(sample, compress=True))
    put("webdataset", "truncated.tar", tar_bytes(sample)[:1500])
    put("shardnames", "range.txt", "shards/{00000..00012}.tar")
    put("shardnames", "lists.txt", "{a,b}/{0..3}-{x,y}.tar.gz")
    put("shardnames", "list.txt", "# shards\n00000.tar\n  {1..2}.tar  \n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
    dirs = {k: os.path.join(out, k) for k in ("safetensors", "config", "image", "list", "homography", "disparity",
                                              "segmentation", "classes", "calibration", "defects", "neurons",
                                              "modelname", "index", "webdataset", "shardnames")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)

    def put(kind, name, data):
        with open(os.path.join(dirs[kind], name), "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())

    put("safetensors", "dinov2_f32", safetensors_bytes(tensors("dinov2"), "F32", {"heads": "2"}))
    put("safetensors", "dinov2_reg2_f16", safetensors_bytes(tensors("dinov2", registers=2), "F16",
                                                            {"heads": "2", "num_registers": "2", "patch_size": "2"}))
    put("safetensors", "timm_reg2_bf16", safetensors_bytes(tensors("timm", registers=2), "BF16",
                                                           {"heads": "2", "layer_norm_eps": "1e-05"}))
    put("safetensors", "sink_f32", safetensors_bytes(tensors("dinov2", sinks=True), "F32",
                                                     {"heads": "2", "attention": "sink",
                                                      "image_mean": "0.5,0.5,0.5", "image_std": "0.2,0.2,0.2"}))
    put("safetensors", "softmax1_swiglu", safetensors_bytes(tensors("dinov2", swiglu=True), "F32",
                                                            {"heads": "2", "attention": "softmax1", "origin": "timm"}))
    put("safetensors", "nometa_f32", safetensors_bytes(tensors("dinov2")))
    put("safetensors", "dinov2_int8", quantized_bytes(tensors("dinov2", registers=2),
                                                      metadata={"num_registers": "2", "patch_size": "2"}))
    put("safetensors", "swiglu_int8_7bit", quantized_bytes(tensors("dinov2", swiglu=True), bits=7))
    put("safetensors", "dinov2_int4", quantized_bytes(tensors("dinov2", registers=2), bits=4,
                                                      metadata={"num_registers": "2", "patch_size": "2"}))
    put("safetensors", "hf_reg2", safetensors_bytes(to_hf(tensors("dinov2", registers=2)), "F32", {"format": "pt"}))

    config = {"architectures": ["Dinov2WithRegistersModel"], "hidden_size": D, "num_attention_heads": 2,
              "num_hidden_layers": 1, "num_register_tokens": 2, "patch_size": PATCH, "image_size": PATCH * GRID,
              "layer_norm_eps": 1e-6, "mlp_ratio": 2, "use_swiglu_ffn": False, "hidden_act": "gelu",
              "model_type": "dinov2_with_registers", "image_mean": [0.5, 0.5, 0.5]}
    put("config", "hf_reg2.json", json.dumps(config, indent=1))
    put("config", "minimal.json", json.dumps({"num_attention_heads": 2}))
    put("config", "contradicts.json", json.dumps(dict(config, hidden_size=16, num_hidden_layers=3)))

    put("image", "rgb.png", png_bytes(6, 4, 3, seed=1))
    put("image", "gray16.png", png_bytes(5, 3, 1, bit_depth=16, seed=2))
    put("image", "gray_alpha.png", png_bytes(4, 4, 2, seed=3))
    put("image", "rgba.png", png_bytes(3, 5, 4, seed=4))
    put("image", "rgb.bmp", bmp_bytes(5, 3))
    put("image", "gray.pgm", b"P5\n4 3\n255\n" + bytes(range(0, 240, 20)))
    put("image", "rgb.ppm", b"P6\n2 2\n255\n" + bytes(range(12)))
    put("image", "tiny.gif", bytes.fromhex("4749463839610200020080000000ffffff21f90401000000002c00000000020002000002028451003b"))
    put("image", "tiny.jpg", jpeg_bytes())
    put("image", "lossy.webp", webp_bytes("lossy"))
    put("image", "lossless_alpha.webp", webp_bytes("lossless_alpha"))
    put("image", "anim.webp", webp_bytes("anim"))
    put("list", "plain.txt", "a.jpg\nb/c.png\n")
    put("list", "comments.txt", "# header\n\n  spaced name.jpg  \r\n\t#not a comment?\nlast-without-newline.png")
    webdataset_seeds(put)
    eval_seeds(put)
    repair_seeds(put)
    index_seeds(put)


def index_seeds(put):
    """An index folder's sidecars (fuzz/search_targets.cpp): index.json on the first line, ids.jsonl after."""
    info = {"format": "vitreg-index", "version": 1, "factory": "Flat", "dim": 4, "count": 2, "faiss_bytes": 90,
            "faiss_digest": "fnv1a64:0000000000000000", "search_parameters": ""}
    ids = ['{"key":"a","path":"a.png","metadata":{"height":8}}',
           '{"key":"b","shard":"s.tar","offset":1024,"metadata":{"caption":"x"}}']
    put("index", "flat.jsonl", json.dumps(info) + "\n" + "\n".join(ids) + "\n")
    put("index", "bad_truncated.jsonl", json.dumps(dict(info, dim=0)) + "\n" + ids[0])
    run = {"resize": "28x28 pipeline=timm resample=torch decode=draft exif-transpose", "model": "m.safetensors"}
    keys = ['{"path":"s.tar","key":"k0","offset":0,"metadata":{"i":0},"status":"ok","row":0}',
            '{"path":"s.tar","key":"bad","offset":1536,"status":"error","error":"x"}']
    put("index", "pixels.jsonl", json.dumps(dict(info, source={"folder": "f", "digest": "", "run": run})) + "\n" +
        "\n".join(keys) + "\n")
    put("index", "cls.npy", npy_bytes(np.arange(8, dtype=np.float32).reshape(2, 4)))
    put("index", "member.tar", tar_bytes([("k0.jpg", b"\xff\xd8\xff\xe0tiny"), ("k0.txt", b"a caption")]))


def eval_seeds(put):
    """What `vitreg eval` reads: homographies, disparity maps, VOC and class folders."""
    hpatches = "7.9e-01 1.0e-02 2.7e+01\n-2.1e-02 9.1e-01 4.2e+01\n1.1e-05 -2.9e-05 1.0e+00\n"
    put("homography", "H_1_2.txt", hpatches)
    put("homography", "identity.txt", "1 0 0 0 1 0 0 0 1")
    put("homography", "opencv.xml", '<?xml version="1.0"?>\n<opencv_storage>\n<H type_id="opencv-matrix">\n'
        "  <rows>3</rows>\n  <cols>3</cols>\n  <dt>d</dt>\n  <data>\n    " + hpatches.replace("\n", " ") +
        "</data></H>\n</opencv_storage>\n")
    put("homography", "bad_2x3.xml", "<opencv_storage><H><rows>2</rows><cols>3</cols><data>1 0 0 0 1 0</data></H></opencv_storage>")
    put("homography", "bad_singular.txt", "1 2 3\n2 4 6\n0 0 1\n")
    put("homography", "bad_nan.txt", "1 0 0 0 nan 0 0 0 1\n")

    disparity = (np.arange(24, dtype=np.float32).reshape(4, 6) % 7) * 1.5
    disparity[0, 0] = np.inf  # unknown, as skimage's motorcycle_disp.npz marks it
    put("disparity", "grey.png", png_bytes(6, 4, 1, seed=5))
    put("disparity", "stored_f4.npz", npz_bytes(disparity, compressed=False))
    put("disparity", "deflated_f8.npz", npz_bytes(disparity.astype(np.float64), compressed=True))
    put("disparity", "bare_f4.npy", npy_bytes(disparity))
    put("disparity", "bad_rgb.png", png_bytes(3, 2, 3, seed=6))
    put("disparity", "bad_3d.npy", npy_bytes(np.zeros((2, 2, 2), np.float32)))

    voc = [[0, 0, 1, 1], [0, 255, 1, 1], [2, 2, 0, 0]]
    palette = [[0, 0, 0], [128, 0, 0], [0, 128, 0]] + [[k, k, k] for k in range(3, 255)] + [[224, 224, 192]]
    masks = ["masks/2007_000032.png", "masks/2007_000039.png"]
    images = ["images/2007_000032.jpg", "images/2007_000039.jpg"]
    put("segmentation", "palette.tree", tree(masks + images, [label_png(voc, palette), label_png(voc[::-1], palette)]))
    put("segmentation", "grey.tree", tree(masks + images + ["images/notes.txt"], [label_png(voc), label_png(voc)]))
    put("segmentation", "bad_missing_mask.tree", tree(masks[:1] + images, [label_png(voc)]))
    one_bit = png_file(4, 3, 1, 0, b"\0\x30\0\x70\0\xc0")  # a 1-bit mask: labels 0 / 1
    put("segmentation", "one_bit.tree", tree(masks + images, [one_bit, one_bit]))

    put("classes", "two_classes.tree", tree(["cat/a.jpg", "cat/b.png", "dog/c.jpg", "dog/d.PNG", "dog/readme.txt"]))
    put("classes", "bad_file_beside.tree", tree(["cat/a.jpg", "cat/b.jpg", "dog/c.jpg", "dog/d.jpg", "labels.csv"]))
    put("classes", "bad_one_image.tree", tree(["cat/a.jpg", "cat/b.jpg", "dog/c.jpg", "empty/"]))


def repair_seeds(put):
    """What the repairs and interventions read, for a model of 2 blocks of width 8 with 2 registers;
    the modelname seeds name these files (fuzz/repair_targets.cpp)."""
    rng = np.random.default_rng(7)
    depth, dim, registers, grid = 2, D, 2, 2
    calibration = {"format": "vitreg-repair-calibration", "layer": "1", "depth": str(depth), "registers": str(registers),
                   "source": "tiny.safetensors", "images": json.dumps(["a.jpg", "b.jpg"])}
    bias = rng.standard_normal((grid * grid, dim)).astype(np.float32)
    means = rng.standard_normal((depth, registers, dim)).astype(np.float32)
    put("calibration", "registers2.safetensors", safetensors_bytes({"bias": bias, "register_means": means}, "F32", calibration))
    put("calibration", "no_registers.safetensors",
        safetensors_bytes({"bias": bias}, "F32", dict(calibration, registers="0", images='["blank:4"]')))
    put("calibration", "bad_layer.safetensors", safetensors_bytes({"bias": bias}, "F32", dict(calibration, layer="2", registers="0")))

    directions = rng.standard_normal((depth, dim)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    singular = np.sort(rng.uniform(0.5, 3, (depth, 3)).astype(np.float32))[:, ::-1]
    meta = {"format": "vitreg.defects", "samples": "16384", "seed": "0", "model": "tiny.safetensors"}
    put("defects", "two_layers.safetensors", safetensors_bytes({"directions": directions, "singular_values": singular}, "F32", meta))
    put("defects", "bad_rows.safetensors",
        safetensors_bytes({"directions": directions, "singular_values": singular[:1]}, "F32", meta))

    ranked = [{"layer": 1, "neuron": n, "score": s} for n, s in [(5, 9.5), (2, 6.25), (7, 1.0)]]
    neurons = {"format": "vitreg-register-neurons", "version": 1, "model": "tiny.safetensors",
               "rule": "norm > median + 10.000000 MAD, last block, patches", "mad_k": 10.0, "images": ["a.jpg", "b.jpg"],
               "images_with_outliers": ["a.jpg"], "selected": [[1, 5], [1, 2]], "ranked": ranked}
    put("neurons", "selected.json", json.dumps(neurons, indent=1))
    put("neurons", "minimal.json", json.dumps({"format": "vitreg-register-neurons", "version": 1, "selected": [[0, 1], [1, 2]],
                                               "ranked": [{"layer": 0, "neuron": 1, "score": 2.5}]}))
    put("neurons", "bad_version.json", json.dumps(dict(neurons, version=2)))
    put("neurons", "bad_no_neurons.json", json.dumps(dict(neurons, selected=[])))

    for name, text in [("plain", "tiny.safetensors"), ("hub_revision", "facebook/dinov2-small@main"),
                       ("kinds", "m.safetensors@softmax1@bf16"), ("int8_scales", "m@int8=scales.json"), ("int4", "m@sink@int4"),
                       ("evict", "m@evict=sink,reg:1,patch:2,3"), ("ttr", "m@ttr=2:neurons.json:2"),
                       ("ttr_list", "m@ttr=1:1:5,0:3"),
                       ("repairs", "m@inpaint=artifacts:-1@denoise=shift:4:median@registers=zero:0,1"),
                       ("calibrated", "m@debias=bias.safetensors@registers=mean:bias.safetensors:last"),
                       ("directions", "m@inpaint=directions:defects.safetensors:all"),
                       ("bad_two_precisions", "m@bf16@int8"), ("bad_layer", "m@inpaint=artifacts:7"),
                       ("bad_unknown", "m@denoise=shift:99")]:
        put("modelname", name + ".txt", text)


if __name__ == "__main__":
    main()
