#!/usr/bin/env python3
"""Writes src/core/checkpoint/timm_architectures.inc: timm's model definitions as a table.

A timm hub config.json names its model by `architecture` and repeats only the arguments it was
created with beyond the definition (`model_args`). What the definition itself sets (act_layer,
global_pool, the norm's eps, ...) lives in timm's source: each `@register_model` function of
timm/models/vision_transformer.py, deit.py and eva.py builds `model_args = dict(...)` and calls
`_create_vision_transformer(...)` / `_create_deit(...)` / `_create_eva(...)` with
`**dict(model_args, **kwargs)`; the model class's `__init__` defaults fill in the rest.

This script reads that source with `ast` (timm is never imported or copied) and writes one row per
architecture (TIMM_ROW: its name, its model class and, as JSON, every argument that changes the
forward), then every parameter of VisionTransformer.__init__ and Eva.__init__ (TIMM_PARAMETER), so
that vitreg classifies each key a hub config's model_args may hold and refuses any other.

  scripts/timm_architectures.py [--timm GIT_DIR] [--commit SHA] [--out FILE]
  scripts/timm_architectures.py --check [FILE]   # FILE is what the script writes today (exit 77: no timm)

GIT_DIR is a clone of huggingface/pytorch-image-models (bare is fine); by default $TIMM_GIT_DIR,
else /work/.mirror/huggingface+pytorch-image-models/repo. --check regenerates from the commit the
file names in its header.
"""
import argparse
import ast
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "src", "core", "checkpoint", "timm_architectures.inc")
DEFAULT_TIMM = os.environ.get("TIMM_GIT_DIR", "/work/.mirror/huggingface+pytorch-image-models/repo")
SKIP = 77  # ctest's SKIP_RETURN_CODE

# The modules read, the factory each one's definitions call, and the class it builds.
MODULES = [
    ("timm/models/vision_transformer.py", "_create_vision_transformer", "VisionTransformer"),
    ("timm/models/deit.py", "_create_deit", "VisionTransformer"),
    ("timm/models/eva.py", "_create_eva", "Eva"),
]
CLASS_FILES = {"VisionTransformer": "timm/models/vision_transformer.py", "Eva": "timm/models/eva.py"}

# The constructor arguments that change the forward (and the shape arguments, for reference);
# the rest (dropout, init, img_size: the tensors tell the grid) do not.
FORWARD_ARGS = {
    "VisionTransformer": [
        "patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio", "act_layer", "mlp_layer", "norm_layer", "norm_eps",
        "class_token", "reg_tokens", "no_embed_class", "pos_embed", "pre_norm", "final_norm", "fc_norm", "global_pool",
        "pool_include_prefix", "qkv_bias", "qk_norm", "proj_bias", "scale_attn_norm", "scale_mlp_norm", "init_values",
        "dynamic_img_pad", "embed_layer", "embed_norm_layer", "block_fn", "attn_layer",
    ],
    "Eva": [
        "patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio", "norm_layer", "norm_eps", "class_token",
        "num_reg_tokens", "no_embed_class", "global_pool", "qkv_bias", "qkv_fused", "swiglu_mlp", "swiglu_align_to",
        "scale_mlp", "scale_attn_inner", "attn_type", "init_values", "use_abs_pos_emb", "use_rot_pos_emb", "rope_type",
        "rope_grid_offset", "rope_grid_indexing", "rope_temperature", "rope_rotate_half", "ref_feat_shape",
        "use_post_norm", "use_pre_transformer_norm", "use_post_transformer_norm", "use_fc_norm", "attn_pool_num_heads",
        "attn_pool_mlp_ratio", "dynamic_img_pad",
    ],
}

# Activations by the name timm's get_act_layer takes (a class stands for its own name).
ACTIVATIONS = {"nn.GELU": "gelu", "GELU": "gelu", "QuickGELU": "quick_gelu", "nn.SiLU": "silu", "GELUTanh": "gelu_tanh"}
# Norm classes: their kind and their eps when the definition does not pass one (torch's
# nn.LayerNorm: 1e-5; timm's LayerNorm and RmsNorm: read from timm/layers/norm.py).
NORMS = {"nn.LayerNorm": "layernorm", "LayerNorm": "layernorm", "RmsNorm": "rmsnorm"}
NORM_NAMES = {"layernorm": "layernorm", "rmsnorm": "rmsnorm"}  # get_norm_layer's string names


def git_show(git_dir, commit, path):
    return subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout


class Resolver:
    """Turns the simple expressions timm's definitions use into JSON values."""

    def __init__(self, norm_eps):
        self.norm_eps = norm_eps  # class name -> its default eps

    def value(self, node, where):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self.value(e, where) for e in node.elts]
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return self.arithmetic(node, where)
        name = ast.unparse(node)
        if name in ACTIVATIONS:
            return ACTIVATIONS[name]
        if name in NORMS:
            return {"norm": NORMS[name], "eps": self.norm_eps[name]}
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("partial", "functools.partial"):
            inner = self.value(node.args[0], where)
            extra = {k.arg: self.value(k.value, where) for k in node.keywords}
            if isinstance(inner, dict) and set(extra) <= {"eps"}:
                return {**inner, **extra}
            return {"partial": inner, **extra}
        if isinstance(node, (ast.Name, ast.Attribute)):
            return name  # a class (SwiGLU, Block, PatchEmbed, ...): named
        raise SystemExit(f"{where}: cannot resolve '{name}'; teach scripts/timm_architectures.py this expression")

    def arithmetic(self, node, where):
        ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.Div: lambda a, b: a / b}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.value(node.operand, where)
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](self.value(node.left, where), self.value(node.right, where))
        raise SystemExit(f"{where}: cannot evaluate '{ast.unparse(node)}'")


def default_eps(norm_source):
    """timm's LayerNorm and RmsNorm eps defaults, from their __init__ signatures."""
    eps = {"nn.LayerNorm": 1e-5}  # torch.nn.LayerNorm's
    for cls in ast.parse(norm_source).body:
        if isinstance(cls, ast.ClassDef) and cls.name in ("LayerNorm", "RmsNorm"):
            init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            args = init.args.args[-len(init.args.defaults):]
            eps[cls.name] = next(d.value for a, d in zip(args, init.args.defaults) if a.arg == "eps")
    return eps


def class_init(source, cls_name):
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    return next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")


def class_parameters(source, cls_name):
    """The names __init__ takes (timm raises TypeError on any other: none takes **kwargs)."""
    init = class_init(source, cls_name)
    if init.args.kwarg or init.args.vararg:
        raise SystemExit(f"{cls_name}.__init__ takes *args or **kwargs: any key would reach it")
    return [a.arg for a in init.args.args[1:] + init.args.kwonlyargs]


def class_defaults(source, cls_name, resolve):
    """The class's __init__ keyword defaults, as JSON values."""
    init = class_init(source, cls_name)
    args = init.args.args[-len(init.args.defaults):]
    return {a.arg: resolve.value(d, f"{cls_name}.__init__ {a.arg}") for a, d in zip(args, init.args.defaults)}


def class_body_defaults(source, cls_name):
    """What VisionTransformer.__init__ makes of its None defaults (`get_norm_layer(norm_layer) or
    LayerNorm`, `get_act_layer(act_layer) or nn.GELU`): the fallback class named in the source."""
    text = ast.get_source_segment(source, next(n for n in ast.parse(source).body
                                               if isinstance(n, ast.ClassDef) and n.name == cls_name))
    found = {}
    for arg in ("norm_layer", "act_layer"):
        m = re.search(rf"{arg} = get_\w+_layer\({arg}\) or ([\w.]+)", text)
        if m:
            found[arg] = m.group(1)
    return found


def normalize(args, where):
    """One spelling per argument: act_layer by name, norm_layer as kind + norm_eps."""
    out = dict(args)
    act = out.get("act_layer")
    if isinstance(act, str):
        out["act_layer"] = ACTIVATIONS.get(act, act)
    norm = out.pop("norm_layer", None)
    if isinstance(norm, dict) and "norm" in norm:
        out["norm_layer"], out["norm_eps"] = norm["norm"], norm["eps"]
    elif isinstance(norm, str) and norm in NORM_NAMES:
        out["norm_layer"] = NORM_NAMES[norm]
    elif norm is not None:
        raise SystemExit(f"{where}: norm_layer {norm!r} is not a norm this script knows")
    return out


def definitions(source, factory, resolve, path):
    """(name, class, the arguments the definition passes) for each @register_model function."""
    for fn in ast.parse(source).body:
        if not (isinstance(fn, ast.FunctionDef) and any(ast.unparse(d) == "register_model" for d in fn.decorator_list)):
            continue
        where = f"{path}:{fn.lineno} {fn.name}"
        local, call = {}, None
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "dict":
                local[node.targets[0].id] = keywords(node.value, resolve, where, local)
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith(".update") \
                    and ast.unparse(node.func)[:-7] in local:
                local[ast.unparse(node.func)[:-7]].update(keywords(node, resolve, where, local))
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == factory:
                call = node
        if call is None:
            raise SystemExit(f"{where}: no call of {factory}")
        variant = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else None
        if variant != fn.name:
            raise SystemExit(f"{where}: builds '{variant}', not its own name")
        args = keywords(call, resolve, where, local)
        args.pop("pretrained", None)
        yield fn.name, args, where


def keywords(call, resolve, where, local):
    """A call's keyword arguments; `**dict(model_args, **kwargs)` and `**model_args` merged in order."""
    out = {}
    for a in call.args:
        if isinstance(a, ast.Name) and a.id in local:  # dict(model_args, ...)
            out.update(local[a.id])
    for k in call.keywords:
        if k.arg is not None:
            out[k.arg] = kwargs_pop_default(k.value, resolve, where)
        elif isinstance(k.value, ast.Name) and k.value.id in local:
            out.update(local[k.value.id])
        elif isinstance(k.value, ast.Call) and ast.unparse(k.value.func) == "dict":
            out.update(keywords(k.value, resolve, where, local))
        elif ast.unparse(k.value) != "kwargs":
            raise SystemExit(f"{where}: cannot read **{ast.unparse(k.value)}")
    return out


def kwargs_pop_default(node, resolve, where):
    """`kwargs.pop('global_pool', 'token')`: the default (a hub config's own value overrides it anyway)."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "kwargs.pop" and len(node.args) == 2:
        return resolve.value(node.args[1], where)
    return resolve.value(node, where)


def rows(git_dir, commit):
    resolve = Resolver(default_eps(git_show(git_dir, commit, "timm/layers/norm.py")))
    defaults = {}
    for cls, path in CLASS_FILES.items():
        source = git_show(git_dir, commit, path)
        d = class_defaults(source, cls, resolve)
        for arg, fallback in class_body_defaults(source, cls).items():
            if d.get(arg) is None:
                d[arg] = resolve.value(ast.parse(fallback, mode="eval").body, f"{cls}.__init__ {arg}")
        defaults[cls] = normalize(d, f"{cls}.__init__")
    out = []
    for path, factory, cls in MODULES:
        for name, args, where in definitions(git_show(git_dir, commit, path), factory, resolve, path):
            row_cls = "VisionTransformerDistilled" if args.pop("distilled", False) else cls
            merged = {**defaults[cls], **normalize(args, where)}
            unknown = set(args) - set(defaults[cls]) - {"norm_layer", "img_size", "dynamic_img_size"}
            if unknown:
                raise SystemExit(f"{where}: passes {sorted(unknown)}, which {cls}.__init__ does not take")
            out.append((name, row_cls, {k: merged[k] for k in FORWARD_ARGS[cls] if k in merged}))
    names = [r[0] for r in out]
    if len(names) != len(set(names)):
        raise SystemExit("an architecture is defined twice")
    return sorted(out)


def cxx_string(s):
    return json.dumps(s)  # JSON's escapes are C++'s for this text (ASCII, quotes, backslashes)


def render(git_dir, commit):
    lines = [f"// generated by scripts/timm_architectures.py from timm commit {commit}; do not edit",
             "// TIMM_ROW(architecture, timm model class, the forward's constructor arguments as JSON), sorted by name;",
             "// TIMM_PARAMETER(model class, a parameter of its __init__), in the signature's order.",
             f"// timm files read: {', '.join(sorted({m[0] for m in MODULES} | {'timm/layers/norm.py'}))}."]
    for name, cls, args in rows(git_dir, commit):
        lines.append(f"TIMM_ROW({cxx_string(name)}, {cxx_string(cls)}, {cxx_string(json.dumps(args, separators=(',', ':')))})")
    for cls, path in CLASS_FILES.items():
        for key in class_parameters(git_show(git_dir, commit, path), cls):
            lines.append(f"TIMM_PARAMETER({cxx_string(cls)}, {cxx_string(key)})")
    return "\n".join(lines) + "\n"


def header_commit(path):
    with open(path) as f:
        m = re.search(r"from timm commit ([0-9a-f]{40})", f.readline())
    return m.group(1) if m else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--timm", default=DEFAULT_TIMM, help="a git clone of pytorch-image-models (bare is fine)")
    p.add_argument("--commit", help="timm's commit to read (default: HEAD; --check: the file's)")
    p.add_argument("--out", default=OUT)
    p.add_argument("--check", nargs="?", const=OUT, metavar="FILE", help="compare FILE with what the script writes")
    a = p.parse_args()
    if not os.path.isdir(a.timm):
        print(f"skipped: no timm clone at {a.timm} (set TIMM_GIT_DIR)")
        return SKIP if a.check else 1
    if a.check:
        commit = a.commit or header_commit(a.check)
        if subprocess.run(["git", "-C", a.timm, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode:
            print(f"skipped: timm commit {commit} is not in {a.timm}")
            return SKIP
        with open(a.check) as f:
            if f.read() != render(a.timm, commit):
                print(f"{a.check} is not what scripts/timm_architectures.py writes from timm {commit}: regenerate it")
                return 1
        print(f"{a.check}: as generated from timm {commit}")
        return 0
    commit = subprocess.run(["git", "-C", a.timm, "rev-parse", a.commit or "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    text = render(a.timm, commit)
    with open(a.out, "w") as f:
        f.write(text)
    count = {m: sum(line.startswith(m) for line in text.splitlines()) for m in ("TIMM_ROW(", "TIMM_PARAMETER(")}
    print(f"{a.out}: {count['TIMM_ROW(']} architectures, {count['TIMM_PARAMETER(']} parameters from timm {commit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
