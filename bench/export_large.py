#!/usr/bin/env python3
"""One random-weight ViT (shared/peers/make_model.py's, the same weights as its --image PX) as
safetensors and ONNX for a large input, without running the model at that size.

usage: export_large.py OUT_DIR --size small|base --image PX [--registers 4]
Prints the stem; STEM.safetensors and STEM.onnx hold the same weights. make_model.py traces the
export at the input's own size, and at 2044 px its PyTorch forward alone holds every head's
N x N scores (tens of GB); here the graph is traced at 518 px with the height and width dynamic,
and its position table is then replaced by the full one. Needs python3-torch and python3-onnx."""
import argparse
import copy
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "peers"))
import make_model  # noqa: E402

TRACE_PX = 518


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", default="small", choices=make_model.SIZES)
    ap.add_argument("--registers", type=int, default=4)
    ap.add_argument("--image", type=int, required=True)
    a = ap.parse_args()
    torch.manual_seed(0)  # as make_model.py: the same weights it writes for --image PX
    d, depth, h = make_model.SIZES[a.size]
    m = make_model.ViT(d, depth, h, a.image // 14, a.registers).eval()
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, f"vit-{a.size}-p14-reg{a.registers}-{a.image}")
    if not (os.path.exists(stem + ".safetensors") and os.path.exists(stem + ".onnx")):
        make_model.save_safetensors(stem + ".safetensors", m.dinov2_state(),
                                    {"heads": h, "patch_size": 14, "num_registers": a.registers, "attention": "softmax",
                                     "pos_interp": "antialias" if a.registers else "offset", "layer_norm_eps": 1e-6})
        small = copy.deepcopy(m)
        grid = TRACE_PX // 14
        small.pos = torch.nn.Parameter(m.pos.detach()[:, : 1 + grid * grid].clone())
        x = torch.randn(1, 3, TRACE_PX, TRACE_PX)
        traced = stem + ".trace.onnx"
        torch.onnx.export(small, (x,), traced, input_names=["pixel_values"], output_names=["cls", "patch"],
                          opset_version=14, dynamic_axes={"pixel_values": {0: "batch", 2: "height", 3: "width"}})
        graph = onnx.load(traced)
        full = m.pos.detach().numpy().astype(np.float32)
        swapped = 0
        for i, init in enumerate(graph.graph.initializer):
            if tuple(init.dims) == (1, 1 + grid * grid, d):
                graph.graph.initializer[i].CopyFrom(numpy_helper.from_array(full, init.name))
                swapped += 1
        if swapped != 1:
            sys.exit(f"export_large.py: found {swapped} position tables in the traced graph, expected 1")
        onnx.save(graph, stem + ".onnx")
        os.remove(traced)
    print(stem)


if __name__ == "__main__":
    main()
