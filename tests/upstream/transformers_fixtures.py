#!/usr/bin/env python3
"""Parity fixtures made by HF transformers' own modeling code (huggingface/transformers,
src/transformers/models/*/modeling_*.py): ViTModel and ViTForImageClassification, Dinov2Model,
Dinov2WithRegistersModel, CLIPVisionModelWithProjection and CLIPModel, SiglipVisionModel and
SiglipModel, and DINOv3ViTModel,
small, with every tensor random, saved as HF folders (model.safetensors + config.json, and for
ViT preprocessor_config.json), with what the float64 forward gives, in float32: the final-normed
class token, registers and patches, SigLIP's pooled feature (its attention-pool head) and CLIP's
image embedding, at the native size and at a non-square one through each model's own interpolation
(interpolate_pos_encoding=True for ViT, CLIP and SigLIP; Dinov2's always interpolates; DINOv3
rotates by any grid).

    /usr/bin/python3 tests/upstream/transformers_fixtures.py TRANSFORMERS_CHECKOUT COMMIT [OUT]

TRANSFORMERS_CHECKOUT holds `src/transformers/{activations.py, conversion_mapping.py}` and the
model folders of FAMILIES at COMMIT, exported from its git history (tests/upstream/README.md); OUT
defaults to tests/fixtures/upstream/transformers.

The tensor names are what save_pretrained writes: the hub's. transformers 5 renames some on load
(conversion_mapping.py: ViT's v4 names, DINOv3's `layer.` under `model.`, the vision towers'
`vision_model.` prefix) and reverts them on save; the script reverts them so, and checks that the
rules themselves, read from the checkout, give the modules' names back. One ViT case keeps the
modules' own names (a state_dict() saved as it is). CASES says what each folder covers.

transformers 5 needs torch 2; Debian's is 1.13. Only the modeling and configuration files and
activations.py are loaded from the checkout (their maths as they are). What they import from the
rest of the library stands in, each printed when the script runs and listed in cases.json, none of
it arithmetic: decorators that only document, cache or gather outputs (the identity), the
attention registry (it hands back the eager_attention_forward passed as its default), the base
classes (nn.Module with the config kept; weights are set here, not by post_init), the output
records, a logger, huggingface_hub's @strict (a dataclass without its type checks),
create_bidirectional_mask (None: with no padding, the eager bias it builds is all zeros) and
torch 2.5's nn.Buffer (the tensor as a plain attribute: only non-persistent position ids and
RoPE's inverse frequencies). Where upstream's eager attention takes its softmax in float32, so
do these references.
"""
import ast
import contextlib
import dataclasses
import importlib.util
import json
import logging
import os
import re
import sys
import types

import torch
from torch import nn

from upstream_util import checkout_args, randomize, write_expected, write_index, write_weights

TF = "src/transformers"
# family -> its files under models/, its config class, and the name of its conversion_mapping.py
# rules (WeightRenaming only) that rename the hub's tensor names into its modules' on load and
# back on save_pretrained (None: the names are the hub's).
FAMILIES = {
    "vit": ("vit/configuration_vit.py", "vit/modeling_vit.py", "ViTConfig", "ViTModel"),
    "dinov2": ("dinov2/configuration_dinov2.py", "dinov2/modeling_dinov2.py", "Dinov2Config", None),
    "dinov2_with_registers": ("dinov2_with_registers/configuration_dinov2_with_registers.py",
                              "dinov2_with_registers/modeling_dinov2_with_registers.py", "Dinov2WithRegistersConfig", None),
    "clip": ("clip/configuration_clip.py", "clip/modeling_clip.py", "CLIPVisionConfig", None),
    "siglip": ("siglip/configuration_siglip.py", "siglip/modeling_siglip.py", "SiglipVisionConfig", None),
    "dinov3_vit": ("dinov3_vit/configuration_dinov3_vit.py", "dinov3_vit/modeling_dinov3_vit.py", "DINOv3ViTConfig",
                   "dinov3_vit"),
}
SMALL = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, image_size=24, patch_size=8)
SQUARE_AND_WIDE = {"native": (24, 24), "wide": (16, 32)}
# folder -> what it is built as and saved like. Each covers a distinct path of vitreg's reading.
CASES = {
    # ViTModel with its pooler, the hub's v4 names, every ViTConfig key written,
    # ViTImageProcessor's squash; a 3x3 grid of 8 px patches, and 2x4 by interpolation.
    "vit_model": dict(family="vit", model="ViTModel", names="hub", config=dict(SMALL, intermediate_size=24),
                      full_config=True, processor="vit", sizes=SQUARE_AND_WIDE),
    # ViTForImageClassification (the `vit.` prefix, a classifier), the modules' own names, no
    # qkv bias, gelu_new (GELU's tanh form), a minimal config.json (eps: ViTConfig's default),
    # DeiT's processor (squash, then crop); a 4x4 grid, and 3x5 by interpolation.
    "vit_classifier": dict(family="vit", model="ViTForImageClassification", names="modules", config=dict(
                           hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                           image_size=32, patch_size=8, qkv_bias=False, hidden_act="gelu_new", num_labels=3),
                           full_config=False, processor="deit", sizes={"native": (32, 32), "wide": (24, 40)}),
    # Dinov2Model: LayerScale, mlp_ratio 4; it interpolates by size whenever the grid differs.
    "dinov2": dict(family="dinov2", model="Dinov2Model", names="hub", config=dict(SMALL, mlp_ratio=4),
                   full_config=True, sizes=SQUARE_AND_WIDE),
    # Dinov2Model with the SwiGLU FFN (ViT-g's).
    "dinov2_swiglu": dict(family="dinov2", model="Dinov2Model", names="hub", config=dict(SMALL, use_swiglu_ffn=True),
                          full_config=True, sizes=SQUARE_AND_WIDE),
    # Dinov2WithRegistersModel: 2 registers, antialiased interpolation by size.
    "dinov2_registers": dict(family="dinov2_with_registers", model="Dinov2WithRegistersModel", names="hub",
                             config=dict(SMALL, mlp_ratio=4, num_register_tokens=2), full_config=True,
                             sizes=SQUARE_AND_WIDE),
    # CLIPVisionModelWithProjection: pre_layrnorm, QuickGELU, post_layernorm, the projection (image_embeds).
    "clip": dict(family="clip", model="CLIPVisionModelWithProjection", names="hub",
                 config=dict(SMALL, intermediate_size=24, projection_dim=8, hidden_act="quick_gelu"),
                 full_config=True, sizes=SQUARE_AND_WIDE),
    # CLIPModel (two towers: config.json's vision_config), its get_image_features; the text tower tiny.
    "clip_model": dict(family="clip", model="CLIPModel", config_class="CLIPConfig", names="hub",
                       config=dict(projection_dim=8, vision_config=dict(SMALL, intermediate_size=24, hidden_act="gelu"),
                                   text_config=dict(hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                                    num_attention_heads=2, vocab_size=16, max_position_embeddings=4)),
                       full_config=True, sizes=SQUARE_AND_WIDE),
    # SiglipVisionModel: no class token, tanh GELU, the attention-pool head (pooler_output).
    "siglip": dict(family="siglip", model="SiglipVisionModel", names="hub", config=dict(SMALL, intermediate_size=20),
                   full_config=True, sizes=SQUARE_AND_WIDE),
    # SiglipModel (two towers), its get_image_features; the text tower tiny.
    "siglip_model": dict(family="siglip", model="SiglipModel", config_class="SiglipConfig", names="hub",
                         config=dict(vision_config=dict(SMALL, intermediate_size=20),
                                     text_config=dict(hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                                      num_attention_heads=2, vocab_size=16, max_position_embeddings=4)),
                         full_config=True, sizes=SQUARE_AND_WIDE),
    # DINOv3ViTModel: 4 registers, axial RoPE, LayerScale, no k bias; a gated MLP in the second.
    "dinov3": dict(family="dinov3_vit", model="DINOv3ViTModel", names="hub",
                   config=dict(SMALL, intermediate_size=32, num_register_tokens=4),
                   full_config=True, sizes=SQUARE_AND_WIDE),
    "dinov3_gated": dict(family="dinov3_vit", model="DINOv3ViTModel", names="hub",
                         config=dict(SMALL, intermediate_size=24, num_register_tokens=4, use_gated_mlp=True,
                                     hidden_act="silu"),
                         full_config=True, sizes=SQUARE_AND_WIDE),
}
# The processors as the hub's files state them: ViT's (v5's keys), DeiT's (v4's feature extractor).
PROCESSORS = {
    "vit": {"image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": 24, "width": 24},
            "resample": 2, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
    "deit": {"feature_extractor_type": "DeiTFeatureExtractor", "do_resize": True, "size": 36, "resample": 3,
             "do_center_crop": True, "crop_size": 32, "do_normalize": True,
             "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]},
}
# LayerNorm weights and LayerScale around 1 (every LayerNorm's is checked to be among them).
NEAR_ONE = ("layernorm_before.weight", "layernorm_after.weight", "layernorm.weight", "norm1.weight", "norm2.weight",
            "norm.weight", "pre_layrnorm.weight", "post_layernorm.weight", "layer_norm1.weight", "layer_norm2.weight",
            "final_layer_norm.weight", "lambda1")
STAND_INS = []


def module(name, **attrs):
    m = types.ModuleType(name)
    m.__path__ = []  # a package, so that submodules resolve
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def stand_in(name, what, **attrs):
    module(name, **attrs)
    STAND_INS.append(f"{name}: {what}")


def identity_decorator(*args, **kwargs):
    """@name and @name(...) alike: the function unchanged."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


class AttentionRegistry:
    def get_interface(self, implementation, default):
        assert implementation == "eager", implementation
        return default


class PreTrainedModel(nn.Module):
    def __init__(self, config, *args, **kwargs):
        super().__init__()
        self.config = config

    @classmethod
    def _from_config(cls, config, **kwargs):
        return cls(config)

    def post_init(self):
        pass


class PreTrainedConfig:
    _attn_implementation = "eager"

    def __post_init__(self, **kwargs):
        pass


class BackboneConfigMixin:
    def set_output_features_output_indices(self, out_indices=None, out_features=None):
        self.out_indices, self.out_features = out_indices, out_features


class ModelOutput:
    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __getattr__(self, name):  # an output not given (hidden_states, attentions) is None
        return None


class Unpack:
    def __class_getitem__(cls, item):
        return cls


def outputs_named(*names):
    return {n: type(n, (ModelOutput,), {}) for n in names}


def install_stand_ins():
    """What the modeling files, their configuration files and activations.py import from the rest
    of transformers (and huggingface_hub), none of it arithmetic."""
    for package in ("transformers", "transformers.models", *(f"transformers.models.{f}" for f in FAMILIES)):
        module(package)
    stand_in("huggingface_hub", "package")
    stand_in("huggingface_hub.dataclasses", "@strict as dataclasses.dataclass (no type checks)",
             strict=dataclasses.dataclass)
    stand_in("transformers.configuration_utils", "PreTrainedConfig: a base with _attn_implementation 'eager'",
             PreTrainedConfig=PreTrainedConfig)
    stand_in("transformers.backbone_utils", "BackboneConfigMixin (keeps out_indices, out_features), BackboneMixin "
             "(unused)", BackboneConfigMixin=BackboneConfigMixin, BackboneMixin=type("BackboneMixin", (), {}),
             filter_output_hidden_states=identity_decorator)
    stand_in("transformers.utils", "auto_docstring, can_return_tuple (identity), logging, torch_int (int), "
             "TransformersKwargs (dict), ModelOutput (a plain record)", auto_docstring=identity_decorator,
             can_return_tuple=identity_decorator, logging=types.SimpleNamespace(get_logger=logging.getLogger),
             torch_int=int, TransformersKwargs=dict, ModelOutput=ModelOutput)
    stand_in("transformers.utils.import_utils", "is_torchdynamo_compiling (False)", is_torchdynamo_compiling=lambda: False)
    stand_in("transformers.utils.generic", "can_return_tuple, merge_with_config_defaults (identity; no argument "
             "of these forwards is among the defaults it fills), maybe_autocast (no autocast: none is on)",
             can_return_tuple=identity_decorator, merge_with_config_defaults=identity_decorator,
             maybe_autocast=lambda **kw: contextlib.nullcontext())
    stand_in("transformers.utils.output_capturing", "capture_outputs (identity: hidden states not gathered)",
             capture_outputs=identity_decorator)
    stand_in("transformers.integrations", "package")
    stand_in("transformers.integrations.hub_kernels", "use_kernel_forward_from_hub (identity: no hub kernels)",
             use_kernel_forward_from_hub=identity_decorator)
    stand_in("transformers.initialization", "weight initializers (unused: weights are set here)")
    stand_in("transformers.masking_utils", "create_bidirectional_mask (None: no padding), create_causal_mask "
             "(the text tower's, unused)", create_causal_mask=None,
             create_bidirectional_mask=lambda config, inputs_embeds, attention_mask=None, **kw: attention_mask)
    stand_in("transformers.modeling_layers", "GradientCheckpointingLayer (nn.Module)", GradientCheckpointingLayer=nn.Module)
    stand_in("transformers.modeling_outputs", "the output records (plain records)",
             **outputs_named("BaseModelOutput", "BaseModelOutputWithPooling", "BackboneOutput", "ImageClassifierOutput",
                             "MaskedImageModelingOutput"))
    stand_in("transformers.modeling_utils", "PreTrainedModel (nn.Module keeping the config), "
             "ALL_ATTENTION_FUNCTIONS (hands back the eager default)",
             PreTrainedModel=PreTrainedModel, ALL_ATTENTION_FUNCTIONS=AttentionRegistry())
    stand_in("transformers.processing_utils", "Unpack (typing only)", Unpack=Unpack)
    stand_in("transformers.pytorch_utils", "compile_compatible_method_lru_cache (identity: no cache)",
             compile_compatible_method_lru_cache=identity_decorator)
    if not hasattr(nn, "Buffer"):  # torch 2.5's; the buffers here are non-persistent (position ids, RoPE's inv_freq)
        nn.Buffer = lambda tensor, persistent=True: tensor
        STAND_INS.append(f"torch {torch.__version__} lacks nn.Buffer: the tensor itself, a plain attribute")


def load(checkout, name, path):
    """One upstream file as module `name`."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(checkout, TF, path))
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


def import_families(checkout):
    """{family: (config module, modeling module)}, loaded from the checkout."""
    install_stand_ins()
    for line in STAND_INS:
        print("stand-in", line)
    load(checkout, "transformers.activations", "activations.py")
    out = {}
    for family, (config_file, modeling_file, _, _) in FAMILIES.items():
        config = load(checkout, f"transformers.models.{family}.{config_file.split('/')[1][:-3]}", "models/" + config_file)
        modeling = load(checkout, f"transformers.models.{family}.{modeling_file.split('/')[1][:-3]}", "models/" + modeling_file)
        out[family] = (config, modeling)
    return out


def conversion_rules(checkout, key):
    """conversion_mapping.py's WeightRenaming(source, target) list under `key`, read with ast."""
    with open(os.path.join(checkout, TF, "conversion_mapping.py")) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == key and isinstance(v, ast.List):
                    assert all(ast.unparse(call.func) == "WeightRenaming" for call in v.elts), key
                    return [tuple(ast.literal_eval(a) for a in call.args) for call in v.elts]
    sys.exit(f"conversion_mapping.py has no rules for {key}")


# The modules' names -> the hub's, for each family whose rules rename: their inverse.
TO_HUB = {
    "vit": [(r"\.layers\.|^layers\.", lambda m: m.group(0).replace("layers.", "encoder.layer.")),
            (r"attention\.([qkv])_proj", lambda m: "attention.attention." + {"q": "query", "k": "key", "v": "value"}[m.group(1)]),
            (r"attention\.o_proj", lambda m: "attention.output.dense"),
            (r"mlp\.fc1", lambda m: "intermediate.dense"),
            (r"mlp\.fc2", lambda m: "output.dense")],
    "dinov3_vit": [(r"^model\.layer\.", lambda m: "layer.")],
}


def hub_names(state_dict, family, model, rules):
    """What save_pretrained writes: the renaming rules reverted (checked: the rules themselves give the
    modules' names back), and for the vision towers CLIPVisionModel's PrefixChange("vision_model")
    reverted for SiglipVisionModel, which shares it (the towers inside CLIPVisionModelWithProjection,
    CLIPModel and SiglipModel are attributes named so)."""
    if family == "siglip" and model == "SiglipVisionModel":
        return {"vision_model." + k: v for k, v in state_dict.items()}
    if not rules:
        return dict(state_dict)
    out = {}
    for name, value in state_dict.items():
        hub = name
        for pattern, replace in TO_HUB[family]:
            hub = re.sub(pattern, replace, hub)
        back = hub
        for source, target in rules:  # transformers' own renaming, as on load: the first match, once
            back = re.sub(source, target, back, count=1)
        assert back == name, (name, hub, back)
        out[hub] = value
    return out


def as_json(value):
    """A config (and the sub-configs of a two-tower one) as its config.json writes it."""
    if dataclasses.is_dataclass(value):
        return {"model_type": type(value).model_type, **{f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    return value


def hub_config(config_class, case, config):
    fields = {k: v for k, v in as_json(config).items() if k != "model_type"}
    written = fields if case["full_config"] else dict(case["config"])
    written = {k: v for k, v in written.items() if k != "num_labels"}
    if case["model"].endswith("ForImageClassification"):
        written["id2label"] = {str(i): f"LABEL_{i}" for i in range(case["config"]["num_labels"])}
    return {"architectures": [case["model"]], "model_type": config_class.model_type, **written}


def build(families, case, generator):
    config_module, modeling = families[case["family"]]
    config_class = getattr(config_module, case.get("config_class", FAMILIES[case["family"]][2]))
    args = dict(case["config"])
    num_labels = args.pop("num_labels", None)
    config = config_class(**args)
    if num_labels:
        config.num_labels = num_labels
    model = getattr(modeling, case["model"])(config).eval()
    randomize(model, generator, NEAR_ONE)
    norms = [n for n, m in model.named_modules() if isinstance(m, nn.LayerNorm) and m.weight is not None]
    assert all((n + ".weight").endswith(NEAR_ONE) for n in norms), norms
    return config_class, config, model


def outputs(case, model, pixels, interpolate):
    """The float64 forward's tokens as vitreg writes them (each after the model's final norm), its
    pooled feature and its embedding, where the model has them."""
    family, x = case["family"], pixels.double()
    with torch.no_grad():
        if family == "vit":
            encoder = model.vit if hasattr(model, "vit") else model
            h = encoder(x, interpolate_pos_encoding=interpolate).last_hidden_state
        elif family == "clip":
            # post_layernorm is CLIP's final norm (ln_post): pooler_output is its CLS; applied to
            # every token here, as open_clip and vitreg do.
            out = model.vision_model(x, interpolate_pos_encoding=interpolate)
            h = model.vision_model.post_layernorm(out.last_hidden_state)
            assert torch.equal(h[:, 0], out.pooler_output)
            embedding = (model.get_image_features(x, interpolate_pos_encoding=interpolate).pooler_output
                         if case["model"] == "CLIPModel" else model(x, interpolate_pos_encoding=interpolate).image_embeds)
            return {"cls": h[:, 0], "patches": h[:, 1:], "embedding": embedding}
        elif family == "siglip":
            tower = model.get_image_features if case["model"] == "SiglipModel" else model
            out = tower(x, interpolate_pos_encoding=interpolate)
            return {"patches": out.last_hidden_state, "pooled": out.pooler_output}
        else:  # Dinov2's interpolate whenever the grid differs; DINOv3 rotates by any grid
            h = model(x).last_hidden_state
    registers = case["config"].get("num_register_tokens", 0)
    return {"cls": h[:, 0], "registers": h[:, 1:1 + registers], "patches": h[:, 1 + registers:]}


def make_case(families, rules, name, case, out, generator, inputs):
    config_class, config, model = build(families, case, generator)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    state = model.state_dict()
    write_weights(os.path.join(folder, "model.safetensors"),
                  hub_names(state, case["family"], case["model"], rules.get(case["family"])) if case["names"] == "hub" else state)
    files = {"config.json": hub_config(config_class, case, config)}
    if "processor" in case:
        files["preprocessor_config.json"] = PROCESSORS[case["processor"]]
    for file, content in files.items():
        with open(os.path.join(folder, file), "w") as f:
            json.dump(content, f, indent=1, sort_keys=True)
            f.write("\n")
    model = model.double()
    expected, rows = {}, []
    for size, (h, w) in case["sizes"].items():
        key = f"{name}.{size}"
        inputs[key] = torch.randn(1, 3, h, w, generator=generator).float()
        # The native size runs the stored positions as they are (interpolate_pos_encoding=False
        # refuses any other size); the other through interpolate_pos_encoding.
        got = outputs(case, model, inputs[key], interpolate=size != "native")
        expected.update({f"{size}.{k}": v for k, v in got.items() if v.numel()})
        rows.append({"name": f"{name} {size}", "model": f"upstream/transformers/{name}", "size": size,
                     "inputs": "upstream/transformers/inputs.safetensors", "input": key,
                     "expected": f"upstream/transformers/{name}/expected.safetensors", "height": h, "width": w,
                     "class": case["model"], "names": case["names"], "outputs": sorted(k for k, v in got.items() if v.numel()),
                     "registers": got["registers"].shape[1] if "registers" in got else 0})
    write_expected(os.path.join(folder, "expected.safetensors"), expected)
    return rows


def main():
    checkout, commit, out = checkout_args(__doc__, "transformers")
    families = import_families(checkout)
    rules = {family: conversion_rules(checkout, key) for family, (_, _, _, key) in FAMILIES.items() if key}
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(53)
    inputs, rows = {}, []
    for name, case in CASES.items():
        rows += make_case(families, rules, name, case, out, generator, inputs)
    write_expected(os.path.join(out, "inputs.safetensors"), inputs)
    write_index(out, "huggingface/transformers", commit, rows, stand_ins=STAND_INS)


if __name__ == "__main__":
    main()
