"""What the upstream fixture scripts share: random weights on every tensor, the files they write,
stand-ins for the torch 2 APIs Debian's torch 1.13 lacks, and the DINO families' hub models and runs."""
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


def checkout_args(doc, name):
    """CHECKOUT COMMIT [OUT] from the command line; OUT defaults to the fixtures' folder `name`."""
    if len(sys.argv) not in (3, 4):
        sys.exit(doc)
    return sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else os.path.join(FIXTURES, name)


def write_weights(path, state_dict, prefix=""):
    ref.write_safetensors(path, {prefix + k: v.detach().float() for k, v in state_dict.items()}, "F32")


def write_expected(path, tensors):
    """The upstream's outputs (float64) and the float32 input they came from, stored as float32."""
    ref.write_safetensors(path, tensors, "F32")


def write_index(out, upstream, version, rows, **extra):
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"upstream": upstream, "commit": version, "torch": torch.__version__, **extra, "cases": rows}, f, indent=1)
        f.write("\n")


def exact_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """torch 2's F.scaled_dot_product_attention in eval, which Debian's torch 1.13 lacks: the same
    maths (softmax(q k^T * scale + mask) v), written out."""
    assert dropout_p == 0.0 and not is_causal
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return scores.softmax(dim=-1) @ v


def stand_in(owner, name, value, what, how):
    """Put `value` where this torch lacks owner.name (a torch 2 API), and say so."""
    if not hasattr(owner, name):
        setattr(owner, name, value)
        print(f"torch {torch.__version__} lacks {what}: {how} stands in")


def stand_in_sdpa():
    stand_in(torch.nn.functional, "scaled_dot_product_attention", exact_sdpa, "F.scaled_dot_product_attention", "exact_sdpa")


def import_checkout(root, package):
    """The upstream package from an exported checkout (its source at the commit recorded)."""
    sys.path.insert(0, os.path.abspath(root))
    return __import__(package)


def forward_features(extra_key):
    """DINOv2's and DINOv3's run: forward_features' class token, extra tokens (`extra_key`: registers,
    DINOv3's storage tokens) and patches, each after the final norm."""
    def run(model, pixels):
        with torch.no_grad():
            out = model.forward_features(pixels.double())
        return {"cls": out["x_norm_clstoken"], "registers": out[extra_key], "patches": out["x_norm_patchtokens"]}
    return run


def dino_inputs(out, sizes, generator):
    """One float32 batch of 2 per size (name -> (height, width)), shared by every case."""
    pixels = {name: torch.randn(2, 3, h, w, generator=generator).float() for name, (h, w) in sizes.items()}
    write_expected(os.path.join(out, "inputs.safetensors"), pixels)
    return pixels


def dino_case(out, upstream, name, model, run, pixels):
    """Save the model as the torch hub's .pth (its state dict, float32) and what its float64
    forward gives at each size (`run(model, x)`: cls, registers, patches); the cases.json rows."""
    os.makedirs(out, exist_ok=True)
    torch.save({k: v.detach().float().clone() for k, v in model.state_dict().items()}, os.path.join(out, name + ".pth"))
    model = model.double().eval()
    expected, rows = {}, []
    for size, x in pixels.items():
        outputs = run(model, x)
        for key, value in outputs.items():
            if value.numel():  # (no registers: nothing to store)
                expected[f"{size}.{key}"] = value
        rows.append({"name": f"{name} {size}", "model": f"upstream/{upstream}/{name}.pth",
                     "expected": f"upstream/{upstream}/{name}.safetensors", "size": size,
                     "inputs": f"upstream/{upstream}/inputs.safetensors",
                     "height": x.shape[2], "width": x.shape[3], "registers": outputs["registers"].shape[1]})
    write_expected(os.path.join(out, name + ".safetensors"), expected)
    return rows


def hub_model(builder, vits, shape, model_class="DinoVisionTransformer", **builder_kwargs):
    """The model a hub builder makes (its own settings), at a small `shape`: vits.<model_class>
    is wrapped while the builder runs. Returns the model and every argument it was built with."""
    real, seen = getattr(vits, model_class), {}

    def small(**kwargs):
        seen.update(kwargs, **shape)
        return real(**seen)

    setattr(vits, model_class, small)
    try:
        model = builder(pretrained=False, **builder_kwargs)
    finally:
        setattr(vits, model_class, real)
    return model.eval(), {k: described(v) for k, v in seen.items() if k != "device"}


def described(value):
    """A builder argument as JSON: plain values as they are, classes and partials by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [described(v) for v in value]
    if hasattr(value, "func"):  # functools.partial
        args = ", ".join(f"{k}={described(v)}" for k, v in sorted(value.keywords.items()))
        return f"{described(value.func)}({args})"
    return getattr(value, "__name__", type(value).__name__)


def make_dino_fixtures(out, upstream, repository, commit, backbones, vits, sizes, builds, run,
                       model_class="DinoVisionTransformer"):
    """DINO's, DINOv2's and DINOv3's fixtures alike: each hub builder's model (`builds`: name -> (shape,
    builder keyword arguments)), every tensor random, `run` at `sizes`, indexed with its settings."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(53)
    pixels = dino_inputs(out, sizes, generator)
    rows, settings = [], {}
    for name, (shape, kwargs) in builds.items():
        model, settings[name] = hub_model(getattr(backbones, name), vits, shape, model_class, **kwargs)
        randomize(model, generator, ("norm1.weight", "norm2.weight", "norm.weight", "gamma"))
        rows += dino_case(out, upstream, name, model, run, pixels)
    write_index(out, repository, commit, rows, settings=settings)
