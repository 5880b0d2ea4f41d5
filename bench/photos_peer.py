#!/usr/bin/env python3
"""The input half of the peer pipeline: a PyTorch DataLoader over a folder of images, written as
float32 batches to stdout for bench/photos_peer.js (ONNX Runtime) to run.

usage: bench/photos_peer.py FOLDER [--batch 8] [--workers N] [--limit K] [--direct]

The pipeline is the one vitreg's users run in Python: a Dataset whose loader is PIL's
Image.open(f).convert("RGB"), the torchvision eval transform Resize(256, BICUBIC), CenterCrop(224),
ToTensor(), Normalize(ImageNet mean, std), and torch.utils.data.DataLoader(batch_size=B,
num_workers=N, shuffle=False) with N = the number of cores by default. ONNX Runtime has no Python
package on this machine, so instead of calling it in-process the main process writes each batch to
stdout; the pipe stands where the in-process call would, and the workers keep prefetching (two
batches each, the default) while the consumer runs.

Stream format (little-endian): per batch a 20-byte header b"VTRB", int32 n, c, h, w, then
n*c*h*w float32 values (NCHW, C order); a header with n = 0 ends the stream. The file names go to
stderr as "# K images" first.

--direct: no DataLoader, no workers; each image is transformed in the main process and sent as a
batch of one (the reference for the sanity check). Needs Debian's python3-torch, python3-torchvision
and python3-pil."""
import argparse
import os
import struct
import sys

EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".ppm", ".pgm")


def list_images(folder):
    out = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        out += [os.path.join(root, f) for f in files if f.lower().endswith(EXTS)]
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--limit", type=int, default=0, help="only the first K images (sorted)")
    ap.add_argument("--direct", action="store_true", help="no DataLoader: batches of one, in-process")
    ap.add_argument("--size", type=int, default=224, help="crop size (the resize is size * 256 / 224)")
    a = ap.parse_args()

    import torch
    from PIL import Image
    from torchvision import transforms

    files = list_images(a.folder)
    if a.limit:
        files = files[: a.limit]
    if not files:
        sys.exit(f"photos_peer.py: no images in {a.folder}")
    print(f"# {len(files)} images", file=sys.stderr)

    tf = transforms.Compose([
        transforms.Resize(a.size * 256 // 224, interpolation=transforms.InterpolationMode.BICUBIC),
        transforms.CenterCrop(a.size),
        transforms.ToTensor(),
        transforms.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
    ])

    def pil_loader(path):
        with open(path, "rb") as f:
            img = Image.open(f)
            return img.convert("RGB")

    class Folder(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return tf(pil_loader(files[i]))

    out = sys.stdout.buffer
    try:  # a larger pipe lets one whole batch go ahead of the consumer (Linux; harmless elsewhere)
        import fcntl
        fcntl.fcntl(out.fileno(), 1031, 1 << 23)  # F_SETPIPE_SZ
    except (ImportError, OSError):
        pass

    def write_all(b):  # stdout is a raw, unbuffered file under python -u / PYTHONUNBUFFERED: writes may be short
        mv = memoryview(b).cast("B")
        while mv:
            mv = mv[out.write(mv):]

    def send(x):
        x = x.contiguous()
        write_all(b"VTRB" + struct.pack("<4i", *x.shape))
        write_all(x.numpy())

    ds = Folder()
    with torch.inference_mode():
        if a.direct:
            for i in range(len(ds)):
                send(ds[i].unsqueeze(0))
        else:
            loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=False, num_workers=a.workers)
            for x in loader:
                send(x)
    write_all(b"VTRB" + struct.pack("<4i", 0, 0, 0, 0))
    out.flush()


if __name__ == "__main__":
    main()
