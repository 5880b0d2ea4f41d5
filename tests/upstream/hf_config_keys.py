#!/usr/bin/env python3
"""The keys of transformers' config classes for the HF sources vitreg reads, at given commits,
found by parsing the source with `ast` (nothing of transformers is imported or run).

    python3 tests/upstream/hf_config_keys.py TRANSFORMERS_REPO COMMIT [--since DATE] [--out FILE]

TRANSFORMERS_REPO is a git directory of huggingface/transformers (bare is fine); files are read
with `git show REV:path`. The keys of each class are the union over every version of its file up
to COMMIT, since DATE (default 2021-05-12, when CLIP, the oldest of these classes, came): a
config.json on the hub carries the keys of the version that wrote it (v4 wrote every generic
PretrainedConfig key; CLIPVisionConfig had `dropout` until 2023, Dinov2WithRegistersConfig first
had interpolate_antialias and interpolate_offset). FILE defaults to
tests/fixtures/upstream/transformers_keys.json, which tests/test_hf_config.cpp holds vitreg's
tables (src/core/checkpoint/hf_config_keys.cpp) to.

A class's keys: its annotated attributes (v5's dataclass fields, ClassVar aside), its __init__
parameters (v4), the `self.NAME = ...` it sets and the `kwargs.pop/get("NAME")` it takes in
__init__/__post_init__, and what its to_dict writes (`output["NAME"] = ...`). Each key's default
is recorded where it is a literal. "modeling" lists the keys the modeling file reads with
getattr/hasattr(config, "NAME") beyond the class's own.
"""
import ast
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "fixtures", "upstream", "transformers_keys.json")

MODELS = "src/transformers/models/"
# name in the fixture -> (class names over the versions, files tried in order, modeling file)
CLASSES = {
    "PreTrainedConfig": (("PreTrainedConfig", "PretrainedConfig"), ("src/transformers/configuration_utils.py",), None),
    "BackboneConfigMixin": (("BackboneConfigMixin",),
                            ("src/transformers/backbone_utils.py", "src/transformers/utils/backbone_utils.py"), None),
    "Dinov2Config": (("Dinov2Config",), (MODELS + "dinov2/configuration_dinov2.py",), MODELS + "dinov2/modeling_dinov2.py"),
    "Dinov2WithRegistersConfig": (("Dinov2WithRegistersConfig",),
                                  (MODELS + "dinov2_with_registers/configuration_dinov2_with_registers.py",),
                                  MODELS + "dinov2_with_registers/modeling_dinov2_with_registers.py"),
    "CLIPVisionConfig": (("CLIPVisionConfig",), (MODELS + "clip/configuration_clip.py",), MODELS + "clip/modeling_clip.py"),
    "CLIPConfig": (("CLIPConfig",), (MODELS + "clip/configuration_clip.py",), None),
    "SiglipVisionConfig": (("SiglipVisionConfig",), (MODELS + "siglip/configuration_siglip.py",),
                           MODELS + "siglip/modeling_siglip.py"),
    "SiglipConfig": (("SiglipConfig",), (MODELS + "siglip/configuration_siglip.py",), None),
    "ViTConfig": (("ViTConfig",), (MODELS + "vit/configuration_vit.py",), MODELS + "vit/modeling_vit.py"),
    "DINOv3ViTConfig": (("DINOv3ViTConfig",), (MODELS + "dinov3_vit/configuration_dinov3_vit.py",),
                        MODELS + "dinov3_vit/modeling_dinov3_vit.py"),
}
# Generation settings the base config took (v4) or drops on load (v5): their defaults' dict keys.
GENERATION = (("src/transformers/configuration_utils.py", "_get_global_generation_defaults"),
              ("src/transformers/generation/configuration_utils.py", "_get_default_generation_params"))

NO_DEFAULT = object()


def show(repo, commit, path):
    r = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def literal(node):
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return NO_DEFAULT
    return list(value) if isinstance(value, tuple) else value


def find_class(tree, names):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in names:
            return node
    return None


def is_classvar(annotation):
    return "ClassVar" in ast.unparse(annotation)


def class_keys(cls):
    """{key: default (NO_DEFAULT when not a literal)} of one class body."""
    keys = {}

    def add(name, default=NO_DEFAULT):
        if name not in keys or keys[name] is NO_DEFAULT:
            keys[name] = default

    methods = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not is_classvar(node.annotation):
            add(node.target.id, literal(node.value) if node.value is not None else NO_DEFAULT)
        elif isinstance(node, ast.FunctionDef):
            methods[node.name] = node
    if "__init__" in methods:
        args = methods["__init__"].args
        positional = args.args[1:]
        defaults = [NO_DEFAULT] * (len(positional) - len(args.defaults)) + [literal(d) for d in args.defaults]
        for a, d in zip(positional, defaults):
            add(a.arg, d)
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            add(a.arg, literal(d) if d is not None else NO_DEFAULT)
    for name in ("__init__", "__post_init__"):
        for node in ast.walk(methods.get(name, ast.Module(body=[], type_ignores=[]))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("pop", "get") \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "kwargs" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                add(node.args[0].value, literal(node.args[1]) if len(node.args) > 1 else NO_DEFAULT)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        add(e.attr)
    for node in ast.walk(methods.get("to_dict", ast.Module(body=[], type_ignores=[]))):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                    add(t.slice.value)
    # A property setter or a ClassVar the serialized dict carries (model_type) is listed by to_dict.
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "model_type" for t in node.targets):
            keys.setdefault("model_type", literal(node.value))
    return keys


def modeling_keys(source):
    """Keys the modeling code reads with getattr/hasattr on a config."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
                and "config" in ast.unparse(node.args[0]):
            out.add(node.args[1].value)
    return out


def generation_keys(repo, commit):
    keys = {}
    for path, function in GENERATION:
        source = show(repo, commit, path)
        if source is None:
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and node.name == function:
                for r in ast.walk(node):
                    if isinstance(r, ast.Return) and isinstance(r.value, ast.Dict):
                        for k, v in zip(r.value.keys, r.value.values):
                            keys.setdefault(k.value, literal(v))
    return keys


def history(repo, commit, since, paths):
    """COMMIT and every commit before it since `since` that changed one of `paths`, newest first."""
    log = subprocess.run(["git", "-C", repo, "log", "--format=%H", f"--since={since}", commit, "--", *paths],
                         capture_output=True, text=True, check=True).stdout.split()
    return [commit] + [c for c in log if c != commit]


def collect(repo, commit, since):
    classes = {}
    for name, (class_names, paths, modeling) in CLASSES.items():
        keys, versions, read = {}, 0, set()
        for rev in history(repo, commit, since, paths + ((modeling,) if modeling else ())):
            for path in paths:
                source = show(repo, rev, path)
                try:
                    cls = find_class(ast.parse(source), class_names) if source else None
                except SyntaxError:
                    cls = None
                if cls is None:
                    continue
                for k, d in class_keys(cls).items():
                    if k not in keys or keys[k] is NO_DEFAULT:
                        keys[k] = d
                versions += 1
                if modeling and (m := show(repo, rev, modeling)):
                    read |= modeling_keys(m)
                break
        if not versions:
            sys.exit(f"{name}: not found at {commit}")
        entry = {"files": list(paths), "versions": versions, "keys": sorted(keys),
                 "defaults": {k: d for k, d in sorted(keys.items()) if d is not NO_DEFAULT}}
        if modeling:
            entry["modeling"] = sorted(read - set(keys))
        classes[name] = entry
    gen = {}
    for rev in history(repo, commit, since, [p for p, _ in GENERATION]):
        for k, d in generation_keys(repo, rev).items():
            gen.setdefault(k, d)
    classes["generation"] = {"keys": sorted(gen), "defaults": dict(sorted(gen.items()))}
    return classes


def main(argv):
    out = DEFAULT_OUT
    if "--out" in argv:
        i = argv.index("--out")
        out = argv[i + 1]
        del argv[i:i + 2]
    since = "2021-05-12"
    if "--since" in argv:
        i = argv.index("--since")
        since = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) != 2:
        sys.exit(__doc__)
    repo = argv[0]
    commit = subprocess.run(["git", "-C", repo, "rev-parse", argv[1]], capture_output=True, text=True,
                            check=True).stdout.strip()
    fixture = {"upstream": "huggingface/transformers", "commit": commit, "since": since,
               "classes": collect(repo, commit, since)}
    with open(out, "w") as f:
        json.dump(fixture, f, indent=1, sort_keys=False)
        f.write("\n")
    for name, entry in fixture["classes"].items():
        print(f"{name}: {len(entry['keys'])} keys" + (f", modeling reads {entry['modeling']}" if entry.get("modeling") else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
