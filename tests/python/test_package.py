"""The vitreg package as its users meet it: the stubs (__init__.pyi) say what the module takes,
pixels come in from any array-like without a copy, and the names DINOv2, timm and HF users type
(from_pretrained, model(x), get_intermediate_layers, list_models, progress=True) are thin aliases
with their sources' semantics, checked against vitreg's own calls and the PyTorch reference."""
import ast
import inspect
import os
import sys

import numpy as np
import pytest
import torch

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
ASSETS = os.path.join(ROOT, "assets", "images")
SHIPPED = "vitreg-untrained-s14-d192-reg4"
TOLERANCE = 1e-4  # relative to the output's scale, as the C++ parity test

sys.path[:0] = [os.path.join(ROOT, "tests", "reference")]
import vit_reference as ref  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return vitreg.Model(SHIPPED, threads=2)


def relative_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


# ---- the installed package ------------------------------------------------------------------

@pytest.mark.skipif(not os.environ.get("VITREG_INSTALLED"), reason="run against the build tree")
def test_the_suite_runs_against_the_installed_package():
    assert os.path.realpath(vitreg.__file__).startswith(os.path.realpath(sys.prefix)), vitreg.__file__
    here = os.path.dirname(vitreg.__file__)
    assert {"py.typed", "__init__.pyi"} <= set(os.listdir(here))


# ---- the stubs ------------------------------------------------------------------------------

STUB = os.path.join(os.path.dirname(vitreg.__file__), "__init__.pyi")


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def stub_signature(node):
    """[(name, kind, default)] of a stub's def; kind 'kw' for keyword-only."""
    a = node.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + [ast.literal_eval(d) for d in a.defaults]
    out = [(p.arg, "pos", d) for p, d in zip(positional, defaults)]
    out += [(p.arg, "kw", None if d is None else ast.literal_eval(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg is not None:  # as pybind11's signature line shows a py::kwargs parameter
        out.append(("**" + a.kwarg.arg, "pos", None))
    return out


def split_top_level(text):
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c in "([{"
        depth -= c in ")]}"
        if c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def runtime_signature(function, name):
    """The same list from what the module itself declares: pybind11's signature line, or inspect's."""
    try:
        parameters = inspect.signature(function).parameters.values()
        return [("**" + p.name, "pos", None) if p.kind == p.VAR_KEYWORD else
                (p.name, "kw" if p.kind == p.KEYWORD_ONLY else "pos", None if p.default is p.empty else p.default)
                for p in parameters]
    except ValueError:
        pass
    line = function.__doc__.splitlines()[0]
    assert line.startswith(name + "("), line
    inner = line[len(name) + 1:line.rindex(") ->")]
    out, kind = [], "pos"
    for part in split_top_level(inner):
        if part == "*":
            kind = "kw"
            continue
        pname = part.split(":")[0].split("=")[0].strip()
        default = part.split(" = ", 1)[1] if " = " in part else None
        out.append((pname, kind, None if default is None else ast.literal_eval(default)))
    return out


def test_every_public_name_has_a_stub_and_every_stub_a_name():
    tree = stub_tree()
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    public = {n for n in dir(vitreg) if not n.startswith("_") and not inspect.ismodule(getattr(vitreg, n))}
    assert public == stubbed, f"not in the stubs: {sorted(public - stubbed)}; only in the stubs: {sorted(stubbed - public)}"


def test_every_public_member_of_a_class_has_a_stub():
    for node in stub_tree().body:
        if not isinstance(node, ast.ClassDef) or issubclass(getattr(vitreg, node.name), Exception):
            continue
        stubbed = {i.name for i in node.body if isinstance(i, ast.FunctionDef)}
        stubbed |= {i.target.id for i in node.body if isinstance(i, ast.AnnAssign)}
        cls = getattr(vitreg, node.name)
        public = {n for k in cls.__mro__ if k.__module__.startswith("vitreg") for n in vars(k) if not n.startswith("_")}
        assert public <= stubbed, f"{node.name}: not in the stubs: {sorted(public - stubbed)}"


def test_every_stubbed_function_and_method_has_the_modules_parameters():
    checked = 0
    for node in stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            assert stub_signature(node) == runtime_signature(getattr(vitreg, node.name), node.name), node.name
            checked += 1
        if isinstance(node, ast.ClassDef):
            cls = getattr(vitreg, node.name)
            for item in node.body:
                if not isinstance(item, ast.FunctionDef):
                    continue
                assert hasattr(cls, item.name), f"{node.name}.{item.name}"
                decorators = {d.id for d in item.decorator_list if isinstance(d, ast.Name)}
                if "property" in decorators or item.name == "__init__" and cls is not vitreg.Model:
                    continue
                want = stub_signature(item)
                if "classmethod" in decorators:
                    want = want[1:]  # cls, bound
                got = runtime_signature(getattr(cls, item.name), item.name)
                assert want == got, f"{node.name}.{item.name}"
                checked += 1
    assert checked >= 20


def test_the_model_stub_names_every_option_of_the_table():
    init = next(i for c in stub_tree().body if isinstance(c, ast.ClassDef) and c.name == "Model"
                for i in c.body if isinstance(i, ast.FunctionDef) and i.name == "__init__")
    keywords = [(name, default) for name, kind, default in stub_signature(init) if kind == "kw"]
    assert keywords == [(o["keyword"], o["default"]) for o in vitreg.model_options()]


# The library's option tables (option_spec.hpp) behind each call's keywords; the defaults a call
# states for itself (a dense job runs one image per forward, the evaluations read whole images).
TABLES = {"extract": ["pixel", "batch"], "dense": ["dense", "pixel", "batch"], "compare": ["pixel"],
          "explore": ["pixel"], "study": ["pixel"], "eval_correspondence": ["pixel"],
          "eval_segmentation": ["segmentation", "pixel"], "eval_knn": ["knn", "pixel"],
          "index": ["index"], "search": ["pixel"]}
OWN_DEFAULTS = {("dense", "batch"): 1, ("eval_correspondence", "resize"): "long:448",
                ("eval_segmentation", "resize"): "long:448",
                # search: None takes the pixel options of the index's extract
                **{("search", k): None for k in ("resize", "pipeline", "resample", "decode", "exif_transpose")}}


def test_the_stubs_keywords_are_the_option_tables():
    stubs = {n.name: n for n in stub_tree().body if isinstance(n, ast.FunctionDef)}
    for function, groups in TABLES.items():
        keywords = [(name, default) for name, kind, default in stub_signature(stubs[function]) if kind == "kw"]
        for group in groups:
            want = [(o["keyword"], OWN_DEFAULTS.get((function, o["keyword"]), o["default"]))
                    for o in vitreg._vitreg._option_table(group)]
            names = [name for name, _ in want]
            got = [k for k in keywords if k[0] in names]
            assert got == want, (function, group)


def test_the_option_tables_bounds_hold_in_python(tmp_path):
    batch = next(o for o in vitreg._vitreg._option_table("batch") if o["keyword"] == "batch")
    assert batch["bounds"] == (1, 4096) and batch["flag"] == "--batch"
    with pytest.raises(vitreg.UsageError, match=r"^batch: 4097 is outside 1\.\.4096$"):
        vitreg.extract(vitreg.Model(SHIPPED), os.path.join(ASSETS, "astronaut.jpg"), tmp_path / "out", batch=4097)
    with pytest.raises(vitreg.UsageError, match=r"^decode: 'fast' is not one of exact, draft$"):
        vitreg.Model(SHIPPED).preprocess(os.path.join(ASSETS, "astronaut.jpg"), decode="fast")


def test_help_shows_the_named_keywords():
    assert "**kwargs" not in vitreg.extract.__doc__.splitlines()[0]
    assert "patch_tokens" in vitreg.extract.__doc__.splitlines()[0]
    assert "precision='fp32'" in str(inspect.signature(vitreg.Model.__init__))


def test_unknown_keywords_are_refused_by_name(model, tmp_path):
    with pytest.raises(TypeError, match="incompatible function arguments"):
        vitreg.extract(model, ASSETS, str(tmp_path / "o"), patch_tokenz=True)
    with pytest.raises(vitreg.UsageError, match=r"Model: unknown option\(s\) colour"):
        vitreg.Model(SHIPPED, colour="red")


# ---- arrays in ------------------------------------------------------------------------------

def test_a_torch_tensor_a_memoryview_and_numpy_give_the_same_features_without_a_copy(model):
    x = torch.from_numpy(np.random.default_rng(3).standard_normal((2, 3, 56, 42)).astype(np.float32))
    want = model.forward(x.numpy())
    for given in (x, memoryview(x.numpy()), x.numpy()):
        assert model._pixels_address(given) == x.data_ptr()  # read in place
        got = model.forward(given)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
    got = model.trace(x, blocks=[-1], queries=[])
    np.testing.assert_array_equal(got["patch"], want["patch"])
    # A slice of a larger tensor is shared too, at its own offset.
    big = torch.zeros(3, 3, 56, 42)
    big[1:] = x
    assert model._pixels_address(big[1:]) == big[1:].data_ptr() != big.data_ptr()
    np.testing.assert_array_equal(model(big[1:])["cls"], want["cls"])


def test_float64_and_strided_inputs_are_refused_not_converted(model):
    x = torch.zeros(1, 3, 28, 28)
    with pytest.raises(vitreg.UsageError, match="float32, got float64"):
        model.forward(x.double())
    with pytest.raises(vitreg.UsageError, match="not C-contiguous"):
        model.forward(x.transpose(2, 3))
    with pytest.raises(vitreg.UsageError, match="float32, got float64"):
        model.forward([[[0.0] * 28] * 28] * 3)  # a list is a new float64 array: refused, not copied in


def test_preprocess_takes_an_image_as_a_tensor(model):
    image = vitreg.read_image(os.path.join(ASSETS, "coffee.jpg"))
    want = model.preprocess(image, resize="112x112")
    np.testing.assert_array_equal(model.preprocess(torch.from_numpy(image), resize="112x112"), want)
    np.testing.assert_array_equal(model.preprocess(memoryview(image), resize="112x112"), want)


# ---- familiar names -------------------------------------------------------------------------

def test_from_pretrained_and_call_are_the_constructor_and_forward(model):
    m = vitreg.Model.from_pretrained(SHIPPED, threads=2, precision="bf16")
    assert isinstance(m, vitreg.Model) and m.config["precision"] == vitreg.Model(SHIPPED, precision="bf16").config["precision"]
    from pathlib import Path
    assert vitreg.Model.from_pretrained(Path(m.path)).path == m.path
    x = model.preprocess(os.path.join(ASSETS, "coffee.jpg"))[None]
    got, want = model(x), model.forward(x)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])
    assert vitreg.list_models() == vitreg.shipped_models() and SHIPPED in vitreg.list_models()


def test_get_intermediate_layers_has_dinov2s_semantics_and_the_references_numbers():
    """dinov2/models/vision_transformer.py: n an int takes the last n blocks, a list those indices
    (in block order); norm applies the final norm; the registers are left out; reshape gives
    [B, D, h, w]; return_class_token pairs each with its class token."""
    path = os.path.join(FIXTURES, "models", "sink_reg2_f32.safetensors")
    cfg, weights = ref.load_model(path)
    m = vitreg.Model(path)
    p, depth, R = m.config["patch"], m.config["depth"], m.config["registers"]
    assert depth >= 2 and R == 2
    x = np.random.default_rng(11).standard_normal((2, 3, 3 * p, 5 * p)).astype(np.float32)
    trace = ref.forward(cfg, weights, torch.from_numpy(x), trace=True)["trace"]
    for norm, key in ((True, "blocks_normed"), (False, "blocks")):
        want = trace[key].numpy()  # [B, L, N, D], N = 1 + R + patches
        got = m.get_intermediate_layers(x, 2, norm=norm)
        assert len(got) == 2
        for g, layer in zip(got, (depth - 2, depth - 1)):
            assert relative_error(g, want[:, layer, 1 + R:]) < TOLERANCE
        pairs = m.get_intermediate_layers(x, [depth - 1, 0], reshape=True, return_class_token=True, norm=norm)
        assert [len(pair) for pair in pairs] == [2, 2]
        for (patches, cls), layer in zip(pairs, (0, depth - 1)):  # block order, as DINOv2 takes them
            assert patches.shape == (2, m.config["dim"], 3, 5) and patches.flags.c_contiguous
            assert relative_error(patches, want[:, layer, 1 + R:].reshape(2, 3, 5, -1).transpose(0, 3, 1, 2)) < TOLERANCE
            assert relative_error(cls, want[:, layer, 0]) < TOLERANCE
    # The last block normed is the forward's output.
    (patches, cls), = m.get_intermediate_layers(x, 1, reshape=True, return_class_token=True)
    out = m.forward(x)
    np.testing.assert_allclose(patches, out["patch"].transpose(0, 3, 1, 2), rtol=0, atol=1e-5)
    np.testing.assert_allclose(cls, out["cls"], rtol=0, atol=1e-5)
    assert m.get_intermediate_layers(x, 0) == ()
    for bad in (depth + 1, [-1], [0, 0], [depth]):
        with pytest.raises(ValueError, match="get_intermediate_layers: n="):
            m.get_intermediate_layers(x, bad)


def test_progress_true_draws_a_tqdm_bar_and_runs_silently_without_tqdm(model, tmp_path, capsys, monkeypatch):
    pytest.importorskip("tqdm")
    summary = vitreg.extract(model, ASSETS, str(tmp_path / "bar"), resize="56x56", progress=True)
    err = capsys.readouterr().err
    assert f"{summary['inputs']}/{summary['inputs']}" in err and "100%" in err
    monkeypatch.setitem(sys.modules, "tqdm", None)  # as where python3-tqdm is not installed
    again = vitreg.extract(model, ASSETS, str(tmp_path / "silent"), resize="56x56", progress=True)
    assert again["ok"] == summary["ok"] and capsys.readouterr().err == ""
    calls = []
    vitreg.extract(model, ASSETS, str(tmp_path / "callable"), resize="56x56", batch=2, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (summary["inputs"], summary["inputs"]) and len(calls) >= 2
