#!/usr/bin/env python3
"""Parity fixtures made by torchvision's own VisionTransformer (Debian's python3-torchvision):
small random models built by torchvision.models.vision_transformer, saved as the state dict
torchvision's vit_* builders load (conv_proj, class_token, encoder.pos_embedding,
encoder.layers.encoder_layer_i.*, encoder.ln, heads.head), with the encoder's output computed in
float64. The non-native size is torchvision's own: interpolate_embeddings() resamples the stored
pos_embedding for a model built at the new image_size, as one fine-tunes at 384 or 518 px.

    /usr/bin/python3 tests/upstream/torchvision_fixtures.py [OUT]

OUT defaults to tests/fixtures/upstream/torchvision. The version recorded is the installed
torchvision's and its Debian package's.
"""
import os
import subprocess
import sys

import torch
import torchvision
from torchvision.models import vision_transformer as tv

from upstream_util import FIXTURES, randomize, write_expected, write_index, write_weights

# hidden 64 in 1 head: the head width 64 of every torchvision ViT but vit_h_14, which is what
# vitreg assumes for a width outside torchvision's five (the state dict does not say).
SHAPE = dict(patch_size=8, num_layers=2, num_heads=1, hidden_dim=64, mlp_dim=128)
NATIVE = 32
SIZES = (32, 48)  # native, and a larger grid through interpolate_embeddings


def build(image_size):
    return tv.VisionTransformer(image_size=image_size, num_classes=10, **SHAPE).eval()


def encoder_output(model, pixels):
    """torchvision's forward up to the head: [CLS, patches] after encoder.ln."""
    x = model._process_input(pixels)
    x = torch.cat([model.class_token.expand(x.shape[0], -1, -1), x], dim=1)
    return model.encoder(x)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(FIXTURES, "torchvision")
    generator = torch.Generator().manual_seed(14)
    model = build(NATIVE)
    randomize(model, generator, ("ln_1.weight", "ln_2.weight", "ln.weight"))
    state = {k: v.detach().float() for k, v in model.state_dict().items()}
    write_weights(os.path.join(out, "vit_tiny.safetensors"), state)
    torch.save(state, os.path.join(out, "vit_tiny.pth"))
    rows = []
    for size in SIZES:
        sized = build(size)
        sized.load_state_dict(tv.interpolate_embeddings(size, SHAPE["patch_size"], state) if size != NATIVE else state)
        pixels = torch.randn(2, 3, size, size, generator=generator).float()
        with torch.no_grad():
            y = encoder_output(sized.double(), pixels.double())
        name = f"vit_tiny_{size}"
        write_expected(os.path.join(out, name + ".safetensors"), {"input": pixels, "cls": y[:, 0], "patches": y[:, 1:]})
        rows.append({"name": name, "model": "upstream/torchvision/vit_tiny.safetensors",
                     "expected": f"upstream/torchvision/{name}.safetensors", "height": size, "width": size})
    package = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "python3-torchvision"], capture_output=True, text=True).stdout
    write_index(out, "pytorch/vision", f"torchvision {torchvision.__version__} (Debian python3-torchvision {package})", rows)


if __name__ == "__main__":
    main()
