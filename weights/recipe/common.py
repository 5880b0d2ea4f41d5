"""Shared pieces of the vitreg training recipe: data synthesis, the ViT, safetensors I/O.

Used by train.py, make_heldout.py and evaluate.py.  Only needs Debian's python3-torch,
python3-numpy, python3-pil and the files installed by setup.sh.
"""

import gzip
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FMNIST_DIR = "/usr/share/datasets/fashion-mnist"
CLASSES = ["tshirt_top", "trouser", "pullover", "dress", "coat",
           "sandal", "shirt", "sneaker", "bag", "ankle_boot"]
TEXTURES = ["brick.png", "grass.png", "gravel.png"]  # skimage.data, public domain / CC0

IMAGE_MEAN = (0.5, 0.5, 0.5)
IMAGE_STD = (0.25, 0.25, 0.25)

# --------------------------------------------------------------------------- configs
CONFIGS = {
    # name: (attention kind, registers)
    "softmax": ("softmax", 0),
    "softmax-reg4": ("softmax", 4),
    "softmax1": ("softmax1", 0),
    "softmax1-reg4": ("softmax1", 4),
    "sink": ("sink", 0),
}


# --------------------------------------------------------------------------- data
def _read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_fmnist(split):
    """split: 'train' or 't10k'. Returns (images [N,28,28] uint8, labels [N] int64)."""
    x = _read_idx(os.path.join(FMNIST_DIR, f"{split}-images-idx3-ubyte.gz"))
    y = _read_idx(os.path.join(FMNIST_DIR, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    return x, y


def load_textures():
    import skimage  # python3-skimage ships the texture PNGs
    from PIL import Image
    d = os.path.join(os.path.dirname(skimage.__file__), "data")
    out = []
    for n in TEXTURES:
        out.append(np.asarray(Image.open(os.path.join(d, n)).convert("L"), dtype=np.float32) / 255.0)
    return out


def _resize_item(item, size):
    """28x28 uint8 -> size x size float32 in [0,1] (bilinear, PIL)."""
    from PIL import Image
    if size == 28:
        return item.astype(np.float32) / 255.0
    im = Image.fromarray(item).resize((size, size), Image.BILINEAR)
    return np.asarray(im, dtype=np.float32) / 255.0


class CanvasSynth:
    """Composites 1..max_items Fashion-MNIST items on a 112x112 canvas (shipped family: 1).

    Background: 75% one plain colour, 25% a low-contrast, tinted crop of an skimage
    texture.  Items: scaled to one of item_sizes (shipped family: 42 or 56 px), tinted with a random colour that contrasts
    with the background, alpha = item intensity.  Label: multi-hot over the 10 classes.
    Every canvas is a pure function of (rng state), so the same seed gives the same data
    stream for every configuration.
    """

    def __init__(self, images, labels, textures, size=112, patch=14, max_items=1,
                 item_sizes=(42, 56), min_items=1, plain=0.75):
        self.images, self.labels, self.textures = images, labels, textures
        self.min_items, self.max_items, self.item_sizes = min_items, max_items, list(item_sizes)
        self.plain = plain
        self.size, self.patch = size, patch
        self._cache = {}

    def item(self, idx, s):
        key = (int(idx), s)
        v = self._cache.get(key)
        if v is None:
            v = _resize_item(self.images[idx], s)
            if len(self._cache) < 200000:
                self._cache[key] = v
        return v

    def sample(self, rng):
        S = self.size
        info = {"background": "plain", "items": []}
        self.last_info = info
        if rng.random() < self.plain:
            bg_col = rng.uniform(0.1, 0.9, size=3).astype(np.float32)
            img = np.broadcast_to(bg_col, (S, S, 3)).copy()
        else:
            ti = int(rng.integers(len(self.textures)))
            t = self.textures[ti]
            y0, x0 = rng.integers(0, t.shape[0] - S), rng.integers(0, t.shape[1] - S)
            crop = t[y0:y0 + S, x0:x0 + S]
            info["background"] = f"{TEXTURES[ti]} crop at ({int(y0)}, {int(x0)})"
            crop = (crop - crop.mean()) * rng.uniform(0.3, 0.8)
            bg_col = rng.uniform(0.25, 0.75, size=3).astype(np.float32)
            img = np.clip(bg_col[None, None, :] + crop[:, :, None], 0, 1).astype(np.float32)
        alpha_all = np.zeros((S, S), np.float32)
        n = int(rng.integers(self.min_items, self.max_items + 1))
        label = np.zeros(len(CLASSES), np.float32)
        for _ in range(n):
            idx = int(rng.integers(len(self.images)))
            s = int(rng.choice(self.item_sizes))
            a = self.item(idx, s)
            y, x = int(rng.integers(0, S - s + 1)), int(rng.integers(0, S - s + 1))
            # colour far from the background mean so the item is visible
            col = rng.uniform(0.0, 1.0, size=3).astype(np.float32)
            far = np.where(bg_col > 0.5, col * 0.35, 0.65 + col * 0.35)
            region = img[y:y + s, x:x + s]
            img[y:y + s, x:x + s] = region * (1 - a[:, :, None]) + far[None, None, :] * a[:, :, None]
            alpha_all[y:y + s, x:x + s] = np.maximum(alpha_all[y:y + s, x:x + s], a)
            label[self.labels[idx]] = 1.0
            info["items"].append({"index": idx, "class": CLASSES[self.labels[idx]], "size": s,
                                  "at": [y, x]})
        u8 = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
        g = S // self.patch
        cover = alpha_all.reshape(g, self.patch, g, self.patch).mean(axis=(1, 3)).reshape(-1)
        return u8, label, cover

    def batch(self, rng, n, cover=False):
        xs, ys, cs = [], [], []
        for _ in range(n):
            u8, lab, cov = self.sample(rng)
            xs.append(u8)
            ys.append(lab)
            cs.append(cov)
        if cover:
            return np.stack(xs), np.stack(ys), np.stack(cs)
        return np.stack(xs), np.stack(ys)


# CanvasSynth's settings as checkpoint metadata (strings) and back: train.py records them,
# artifacts.py draws held-out canvases like the checkpoint's training data from them
_DATA_KEYS = {"size": ("image_size", int, 112), "item_sizes": ("item_sizes", None, (42, 56)),
              "min_items": ("min_items", int, 1), "max_items": ("max_items", int, 1),
              "plain": ("plain_background", float, 0.75)}


def data_metadata(settings):
    out = {}
    for k, (name, _, _) in _DATA_KEYS.items():
        v = settings[k]
        out[name] = ",".join(str(s) for s in v) if k == "item_sizes" else str(v)
    return out


def data_settings(meta):
    out = {}
    for k, (name, kind, default) in _DATA_KEYS.items():
        if name not in meta:
            out[k] = default
        elif k == "item_sizes":
            out[k] = [int(v) for v in meta[name].split(",")]
        else:
            out[k] = kind(meta[name])
    return out


def kurtosis(x):
    """Pearson kurtosis mu4/sigma^4 (not excess) of all values of each image's x [B, ...]."""
    flat = np.asarray(x, np.float64).reshape(len(x), -1)
    c = flat - flat.mean(1, keepdims=True)
    return (c ** 4).mean(1) / (c ** 2).mean(1) ** 2


def to_input(u8):
    """uint8 [B,H,W,3] -> normalized float32 tensor [B,3,H,W] (the vitreg preprocessing)."""
    x = torch.from_numpy(np.ascontiguousarray(u8)).float().div_(255.0).permute(0, 3, 1, 2)
    mean = torch.tensor(IMAGE_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGE_STD).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous()


# --------------------------------------------------------------------------- model
class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.kind = "softmax"
        self.sinks = None  # nn.Parameter [heads] for kind == 'sink' (added after shared init)

    def forward(self, x, record=None):
        B, N, D = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        z = (q * self.hd ** -0.5) @ k.transpose(-2, -1)  # [B,H,N,N]
        if self.kind == "softmax":
            p = z.softmax(-1)
            abst = None
        else:
            if self.kind == "softmax1":
                s = z.new_zeros(B, self.heads, N, 1)
            else:
                s = self.sinks.view(1, self.heads, 1, 1).expand(B, self.heads, N, 1)
            full = torch.cat([z, s], dim=-1).softmax(-1)  # stable: max over [z, s]
            p = full[..., :N]
            abst = full[..., N]
        if record is not None:
            record["attn"] = p.detach()
            record["abstention"] = abst.detach() if abst is not None else None
        out = (p @ v).transpose(1, 2).reshape(B, N, D)
        return self.proj(out)


class LayerScale(nn.Module):
    def __init__(self, dim, init):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), init))

    def forward(self, x):
        return x * self.gamma


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))  # exact erf GELU


class Block(nn.Module):
    def __init__(self, dim, heads, ls_init):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.ls1 = LayerScale(dim, ls_init)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)
        self.ls2 = LayerScale(dim, ls_init)

    def forward(self, x, record=None):
        x = x + self.ls1(self.attn(self.norm1(x), record))
        x = x + self.ls2(self.mlp(self.norm2(x)))
        return x


class ViT(nn.Module):
    """DINOv2-layout ViT with [CLS, registers, patches] tokens and a classification head.

    class_token=False drops CLS (timm's class_token=False, global_pool='avg'): tokens are
    [registers, patches] and the head reads the mean of the final-normed patch tokens.
    """

    def __init__(self, dim=128, depth=6, heads=2, patch=14, grid=8, registers=0,
                 attention="softmax", num_classes=10, ls_init=0.1, head_input="cls",
                 class_token=True):
        super().__init__()
        self.dim, self.depth, self.heads, self.patch, self.grid = dim, depth, heads, patch, grid
        self.num_registers, self.attention, self.head_input = registers, attention, head_input
        self.class_token = class_token
        self.prefix = (1 if class_token else 0) + registers  # tokens before the patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if class_token else None
        self.pos_embed = nn.Parameter(torch.zeros(1, (1 if class_token else 0) + grid * grid, dim))
        self.mask_token = nn.Parameter(torch.zeros(1, dim), requires_grad=False)
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.ModuleList([Block(dim, heads, ls_init) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim if head_input == "cls" else 2 * dim, num_classes)
        self.register_tokens = None
        for b in self.blocks:
            b.attn.kind = attention

    def init_weights(self, seed):
        """Shared parameters first (identical across configs), then the extras."""
        g = torch.Generator().manual_seed(seed)

        def tn(t, std=0.02):
            with torch.no_grad():
                v = torch.randn(t.shape, generator=g)
                bad = v.abs() > 2
                while bad.any():
                    v[bad] = torch.randn(int(bad.sum()), generator=g)
                    bad = v.abs() > 2
                t.copy_(v * std)

        with torch.no_grad():
            if self.class_token:
                self.cls_token.copy_(torch.randn(self.cls_token.shape, generator=g) * 0.02)
            self.pos_embed.copy_(torch.randn(self.pos_embed.shape, generator=g) * 0.02)
            tn(self.patch_embed.proj.weight)
            self.patch_embed.proj.bias.zero_()
            for b in self.blocks:
                for lin in (b.attn.qkv, b.attn.proj, b.mlp.fc1, b.mlp.fc2):
                    tn(lin.weight)
                    lin.bias.zero_()
            tn(self.head.weight)
            self.head.bias.zero_()
            # extras, drawn after everything shared
            if self.num_registers > 0:
                self.register_tokens = nn.Parameter(
                    torch.randn(1, self.num_registers, self.dim, generator=g) * 0.02)
            if self.attention == "sink":
                for b in self.blocks:
                    b.attn.sinks = nn.Parameter(torch.zeros(self.heads))  # init 0 = softmax-1

    def features(self, x, records=None):
        B = x.shape[0]
        t = self.patch_embed.proj(x).flatten(2).transpose(1, 2)  # [B, M*M, D], row-major
        if self.class_token:
            t = torch.cat([self.cls_token.expand(B, -1, -1), t], dim=1)
        t = t + self.pos_embed
        if self.num_registers > 0:
            c = 1 if self.class_token else 0
            t = torch.cat([t[:, :c], self.register_tokens.expand(B, -1, -1), t[:, c:]], dim=1)
        for i, b in enumerate(self.blocks):
            rec = None
            if records is not None:
                rec = {}
                records.append(rec)
            t = b(t, rec)
            if rec is not None:
                rec["x"] = t.detach()
        return t, self.norm(t)

    def head_features(self, xn):
        if not self.class_token:
            return xn[:, self.prefix:].mean(1)
        if self.head_input == "cls":
            return xn[:, 0]
        return torch.cat([xn[:, 0], xn[:, self.prefix:].mean(1)], dim=-1)

    def forward(self, x):
        _, xn = self.features(x)
        return self.head(self.head_features(xn))


def build_model(config, seed, dim=128, depth=6, heads=2, ls_init=0.1, head_input="cls",
                grid=8, class_token=True):
    kind, regs = CONFIGS[config]
    m = ViT(dim=dim, depth=depth, heads=heads, grid=grid, registers=regs, attention=kind,
            ls_init=ls_init, head_input=head_input, class_token=class_token)
    m.init_weights(seed)
    return m


# --------------------------------------------------------------------------- safetensors
def export_tensors(model):
    """dinov2-layout name -> float32 numpy array, in a fixed order."""
    out = [("cls_token", model.cls_token)] if model.class_token else []
    if model.num_registers > 0:
        out.append(("register_tokens", model.register_tokens))
    out += [("pos_embed", model.pos_embed), ("mask_token", model.mask_token),
            ("patch_embed.proj.weight", model.patch_embed.proj.weight),
            ("patch_embed.proj.bias", model.patch_embed.proj.bias)]
    for i, b in enumerate(model.blocks):
        p = f"blocks.{i}."
        out += [(p + "norm1.weight", b.norm1.weight), (p + "norm1.bias", b.norm1.bias),
                (p + "attn.qkv.weight", b.attn.qkv.weight), (p + "attn.qkv.bias", b.attn.qkv.bias),
                (p + "attn.proj.weight", b.attn.proj.weight), (p + "attn.proj.bias", b.attn.proj.bias)]
        if b.attn.sinks is not None:
            out.append((p + "attn.sinks", b.attn.sinks))
        out += [(p + "ls1.gamma", b.ls1.gamma),
                (p + "norm2.weight", b.norm2.weight), (p + "norm2.bias", b.norm2.bias),
                (p + "mlp.fc1.weight", b.mlp.fc1.weight), (p + "mlp.fc1.bias", b.mlp.fc1.bias),
                (p + "mlp.fc2.weight", b.mlp.fc2.weight), (p + "mlp.fc2.bias", b.mlp.fc2.bias),
                (p + "ls2.gamma", b.ls2.gamma)]
    out += [("norm.weight", model.norm.weight), ("norm.bias", model.norm.bias),
            ("head.weight", model.head.weight), ("head.bias", model.head.bias)]
    return [(n, t.detach().float().cpu().numpy()) for n, t in out]


def write_safetensors(path, tensors, metadata, dtype="F16"):
    np_dtype = {"F16": "<f2", "F32": "<f4"}[dtype]
    arrs = [(n, np.ascontiguousarray(a.astype(np_dtype))) for n, a in tensors]
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    off = 0
    for n, a in arrs:
        header[n] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    hj = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode()
    hj += b" " * ((-len(hj)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for _, a in arrs:
            f.write(a.tobytes())
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n, = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    dt = {"F16": "<f2", "F32": "<f4", "BF16": None}
    tensors = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=dt[e["dtype"]]).reshape(e["shape"])
        tensors[name] = arr.astype(np.float32)
    return tensors, meta


def load_model(path):
    """Rebuild a ViT from a vitreg checkpoint written by this recipe (F16 values -> float32)."""
    tensors, meta = read_safetensors(path)
    D = tensors["pos_embed"].shape[-1]
    class_token = "cls_token" in tensors
    depth = len({k.split(".")[1] for k in tensors if k.startswith("blocks.")})
    heads = int(meta["heads"])
    patch = int(meta["patch_size"])
    regs = int(meta.get("num_registers", "0"))
    grid = int(round(math.sqrt(tensors["pos_embed"].shape[1] - (1 if class_token else 0))))
    m = ViT(dim=D, depth=depth, heads=heads, patch=patch, grid=grid, registers=regs,
            attention=meta["attention"], num_classes=tensors["head.weight"].shape[0],
            head_input=meta.get("head_input", "cls"), class_token=class_token)
    if regs > 0:
        m.register_tokens = nn.Parameter(torch.zeros(1, regs, D))
    if meta["attention"] == "sink":
        for b in m.blocks:
            b.attn.sinks = nn.Parameter(torch.zeros(heads))
    named = dict(export_tensors(m))
    params = dict(m.named_parameters())
    params["mask_token"] = m.mask_token
    with torch.no_grad():
        for name in named:
            params[name].copy_(torch.from_numpy(tensors[name]))
    m.eval()
    return m, meta
