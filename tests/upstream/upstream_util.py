"""What the upstream fixture scripts share: random weights on every tensor, the files they write."""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "upstream")
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import vit_reference as ref  # noqa: E402  (its deterministic safetensors writer only)


def randomize(model, generator, near_one):
    """Every parameter random: those whose name ends in one of `near_one` (LayerNorm weights,
    LayerScale) around 1, vectors small, matrices at unit variance over their fan-in."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.dtype)
            if name.endswith(near_one):
                p.copy_(1.0 + 0.2 * noise)
            elif p.dim() < 2:
                p.copy_(0.2 * noise)
            else:
                p.copy_(noise / p[0].numel() ** 0.5)


def write_weights(path, state_dict, prefix=""):
    ref.write_safetensors(path, {prefix + k: v.detach().float() for k, v in state_dict.items()}, "F32")


def write_expected(path, tensors):
    """The upstream's outputs (float64) and the float32 input they came from, stored as float32."""
    ref.write_safetensors(path, tensors, "F32")


def write_index(out, upstream, version, rows, **extra):
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"upstream": upstream, "commit": version, "torch": torch.__version__, **extra, "cases": rows}, f, indent=1)
        f.write("\n")
