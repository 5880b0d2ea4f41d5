#!/usr/bin/env python3
"""The PyTorch peer of `vitreg extract` on webdataset shards: what a user writes without vitreg.

usage: bench/shards_peer.py MAKE_MODEL SHARD... [--size small] [--registers 4] [--image 224] [--seed 0]
                            [--batch 8] [--workers 2] [--threads 2] [--save CLS.npy] [--limit K]

An IterableDataset reads the shards with Python's tarfile (streamed, mode "r|*"), the shards split
between the DataLoader's workers as webdataset's split_by_worker does, groups members by key (the
basename up to its first dot), decodes KEY.jpg with PIL (Image.open().convert("RGB")) and applies
torchvision's eval transform (Resize(256, BICUBIC), CenterCrop(224), ToTensor, Normalize(ImageNet));
a torch.utils.data.DataLoader(batch_size, num_workers) feeds the model, run under
torch.inference_mode() with torch.set_num_threads(threads). The model is MAKE_MODEL's ViT
(../shared/peers/make_model.py), built with the same seed, so its weights are the ones make_model.py
wrote to the safetensors vitreg reads.

Prints one line: "peer: N images in S s (R images/s) ...". --save writes the CLS features in key
order (for the benchmark's sanity check). Needs Debian's python3-torch, python3-torchvision,
python3-pil."""
import argparse
import importlib.util
import io
import os
import tarfile
import time

import numpy as np
import torch
from PIL import Image
from torchvision import transforms


class Shards(torch.utils.data.IterableDataset):
    def __init__(self, shards, transform, limit):
        self.shards, self.transform, self.limit = shards, transform, limit

    def samples(self, path):
        key, image = None, None
        with tarfile.open(path, "r|*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                name = os.path.basename(member.name)
                k, _, ext = name.partition(".")
                if k != key:
                    if image is not None:
                        yield key, image
                    key, image = k, None
                if ext.lower() in ("jpg", "jpeg", "png", "webp"):
                    image = tar.extractfile(member).read()
        if image is not None:
            yield key, image

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        mine = self.shards if info is None else self.shards[info.id::info.num_workers]
        count = 0
        for path in mine:
            for key, data in self.samples(path):
                if self.limit and count >= self.limit:
                    return
                count += 1
                with Image.open(io.BytesIO(data)) as im:
                    yield int(key), self.transform(im.convert("RGB"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("make_model")
    ap.add_argument("shards", nargs="+")
    ap.add_argument("--size", default="small")
    ap.add_argument("--registers", type=int, default=4)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="images per worker (0: all)")
    ap.add_argument("--save", default="")
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("make_model", a.make_model)
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)
    torch.manual_seed(a.seed)  # as make_model.py does before building the model it writes
    d, depth, heads = mm.SIZES[a.size]
    model = mm.ViT(d, depth, heads, a.image // 14, a.registers).eval()
    torch.set_num_threads(a.threads)
    transform = transforms.Compose([
        transforms.Resize(256, interpolation=transforms.InterpolationMode.BICUBIC),
        transforms.CenterCrop(a.image),
        transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    ])
    loader = torch.utils.data.DataLoader(Shards(a.shards, transform, a.limit), batch_size=a.batch,
                                         num_workers=a.workers)
    keys, feats = [], []
    start = time.perf_counter()
    with torch.inference_mode():
        for k, x in loader:
            cls, _ = model(x)
            keys.append(k.numpy())
            feats.append(cls.numpy())
    seconds = time.perf_counter() - start
    keys, feats = np.concatenate(keys), np.concatenate(feats)
    if a.save:
        np.save(a.save, feats[np.argsort(keys, kind="stable")])
    print(f"peer: {len(keys)} images in {seconds:.1f} s ({len(keys) / seconds:.2f} images/s after the model is built); "
          f"torch {torch.__version__}, {a.workers} DataLoader workers, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()
