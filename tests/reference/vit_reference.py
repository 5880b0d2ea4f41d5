#!/usr/bin/env python3
"""Independent PyTorch reference of the DINOv2-style ViT forward that vitreg implements.

Semantics: docs/design.md, "Reference semantics" (forward, position-embedding resampling, checkpoint
layouts) and "Attention normalizers". Everything is computed in float64 except the
position-embedding resampling, which DINOv2 / timm / HF do in float32 and so do we.

The module has seven parts, top to bottom:
  1. safetensors I/O (written by hand: no `safetensors` package needed),
  2. layouts: canonical weights <-> dinov2 / timm_reg / hf / timm / open_clip / hf_clip /
     hf_siglip / hf_dinov3 / dinov3_hub tensor names, one adapter each,
  3. config resolution (metadata, config.json, open_clip_config.json, preprocessor_config.json,
     shapes, defaults, overrides) and `load_model`,
  4. the forward pass, optionally with a trace (the per-layer quantities of docs/design.md, "Artifact metrics", and every
     block's output, plain and final-normed, as dinov2's get_intermediate_layers gives them)
     and with inference-time interventions (docs/design.md, "Interventions and the study": key eviction, test-time registers),
  5. attention rollout,
  6. dense features: bilinear upsampling of a channels-last feature grid,
  7. interventions (docs/design.md, "Interventions and the study"): sink keys, the robust artifact rule, eviction masks, sink
     calibration, register-neuron scores.

Canonical weights are a dict of float64 tensors with the dinov2 names (see docs/design.md, "Reference semantics"):
  cls_token [1,1,D], register_tokens [1,R,D] (R > 0 only), pos_embed [1,1+M*M,D],
  mask_token [1,D] (unused by the forward), patch_embed.proj.{weight [D,3,p,p], bias [D]},
  blocks.i.{norm1,norm2,attn.qkv,attn.proj}.{weight,bias}, blocks.i.ls{1,2}.gamma [D] (optional:
  absent means 1), blocks.i.mlp.{fc1,fc2}.* or blocks.i.mlp.{w12,w3}.* (SwiGLU),
  blocks.i.attn.sinks [heads] (optional), norm.{weight,bias}.
Other families (docs/design.md, "Families"; timm's VisionTransformer flags, OpenCLIP's and HF's CLIP vision
towers) use the same names, some optional, plus a few more:
  cls_token absent (timm class_token=False), pos_embed [1,M*M,D] (timm no_embed_class: the class
  token and registers get no position), patch_embed.proj.bias / blocks.i.attn.qkv.bias absent
  (CLIP's conv1, qkv_bias=False), norm_pre.{weight,bias} (timm norm_pre, CLIP ln_pre: a LayerNorm
  after the positions, before the blocks), norm.* absent with fc_norm.{weight,bias} present (timm
  global_pool='avg': pooled = fc_norm(mean of the patch tokens)), proj [D,E] (CLIP: embedding =
  final-normed CLS @ proj). The MLP activation is cfg.mlp: gelu | quick_gelu | swiglu | gelu_tanh.
SigLIP's vision tower (docs/design.md, "Families"; HF SiglipVisionModel) adds timm's AttentionPoolLatent names
for its attention-pool (MAP) head: attn_pool.latent [1,1,D] (HF head.probe), attn_pool.q.{weight
[D,D], bias} and attn_pool.kv.{weight [2D,D], bias} (HF head.attention.in_proj_* rows [0:D] and
[D:3D], k then v), attn_pool.proj.* (out_proj), attn_pool.norm.* (head.layernorm),
attn_pool.mlp.{fc1,fc2}.*; then cfg.pool == "map" and pooled = the head's output. timm's own
SigLIP towers (vit_*_siglip_*: VisionTransformer with class_token=False, global_pool='map') store
exactly these names (TimmLayout): pos_embed [1,M*M,D], no fc_norm, no head; family siglip from the
hub config.json's architecture, the activation from model_args.act_layer (nn.GELU when absent).
DINOv3 (docs/design.md, "Families"; HF DINOv3ViTModel) uses the dinov2 names with no pos_embed at all
(cfg.positions == "rope_dinov3": 2D axial RoPE on the patch tokens' q and k, see
`rope_dinov3_tables`); a checkpoint without a k bias gets zero k rows in blocks.i.attn.qkv.bias;
the gated MLP is blocks.i.mlp.w12 = [gate; up] and w3 = down (cfg.mlp "swiglu"). Its torch-hub
.pth state dicts (`Dinov3HubLayout`) keep these names but for storage_tokens and mlp.w1 / w2, and
hold qkv.bias_mask and rope_embed.periods buffers.
EVA-02 (docs/design.md, "Families"; timm `Eva`, `TimmEvaLayout`, family "eva") uses the dinov2 names with a learned
pos_embed (class row included) AND, with cfg.positions == "rope_eva", timm's RotaryEmbeddingCat on
the patch tokens' q and k (`rope_eva_tables`: interleaved pairs, positions arange(n)/n *
cfg.rope_ref_grid per axis); its SwiGLU MLP is blocks.i.mlp.w12 = [gate; value] and w3, with the
sub-LayerNorm blocks.i.mlp.norm [H] (cfg.mlp_norm: on silu(gate) * value, before w3); the EVA-CLIP
towers add blocks.i.attn.norm [D] (cfg.attn_norm: a LayerNorm on the merged heads' attention
output, before attn.proj); the k third of blocks.i.attn.qkv.bias is zero (timm has no k bias).

Needs only python3-torch and python3-numpy.
"""
import json
import math
import os
import struct
import dataclasses
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# 1. safetensors I/O
# ---------------------------------------------------------------------------------------------

_TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "U8": torch.uint8}
_NUMPY_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "U8": np.dtype("u1")}


def _encode(t, dtype):
    """Bytes of tensor `t` stored as `dtype` (round-to-nearest-even for F16 / BF16)."""
    t = torch.as_tensor(t).detach().to(_TORCH_DTYPES[dtype]).contiguous()
    a = t.view(torch.int16).numpy().view(np.uint16) if dtype == "BF16" else t.numpy()  # raw bits
    return a.astype(_NUMPY_DTYPES[dtype], copy=False).tobytes()


def _decode(raw, dtype, shape):
    """float64 tensor holding exactly the stored values."""
    a = np.frombuffer(raw, dtype=_NUMPY_DTYPES[dtype])
    if dtype == "BF16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return torch.from_numpy(a.astype(np.float64)).reshape(shape)


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """Write `tensors` (name -> tensor/array) all stored as `dtype`, names sorted, deterministic.

    `metadata` (str -> str) goes to `__metadata__`; None writes no `__metadata__` at all."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        blob = _encode(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(torch.as_tensor(tensors[name]).shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """(name -> float64 tensor of the stored values, metadata dict or None)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", None)
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        tensors[name] = _decode(body[begin:end], info["dtype"], info["shape"])
    return tensors, metadata


# ---------------------------------------------------------------------------------------------
# 2. Layouts: the only place where tensor names are translated
# ---------------------------------------------------------------------------------------------

def block_count(names, prefix="blocks."):
    return len({name[len(prefix):].split(".", 1)[0] for name in names if name.startswith(prefix)})


class Dinov2Layout:
    """facebookresearch/dinov2 hub checkpoints: the canonical names themselves."""
    name = "dinov2"

    @staticmethod
    def to_stored(canonical):
        return dict(canonical)

    @staticmethod
    def to_canonical(stored):
        return dict(stored)


class TimmRegLayout:
    """timm's converted register models (`no_embed_class`): `reg_token` instead of
    `register_tokens`, `cls_token` already holds cls + pos_embed[0], `pos_embed [1,M*M,D]` covers
    the patches only, and there is no mask_token."""
    name = "timm_reg"

    @staticmethod
    def to_stored(canonical):
        stored = {k: v for k, v in canonical.items()
                  if k not in ("cls_token", "pos_embed", "register_tokens", "mask_token")}
        stored["cls_token"] = canonical["cls_token"] + canonical["pos_embed"][:, :1]
        stored["pos_embed"] = canonical["pos_embed"][:, 1:]
        stored["reg_token"] = canonical["register_tokens"]
        return stored

    @staticmethod
    def to_canonical(stored):
        canonical = {k: v for k, v in stored.items() if k not in ("pos_embed", "reg_token")}
        patch_pos = stored["pos_embed"]
        canonical["pos_embed"] = torch.cat([torch.zeros_like(patch_pos[:, :1]), patch_pos], dim=1)
        canonical["register_tokens"] = stored["reg_token"]
        return canonical


class HFLayout:
    """HF transformers Dinov2Model / Dinov2WithRegistersModel (hyper-parameters in config.json).
    Names are translated by prefix through one table per level, used in both directions; the
    fused qkv travels as attn.{query,key,value} inside this adapter."""
    name = "hf"
    TOP = [("cls_token", "embeddings.cls_token"),
           ("register_tokens", "embeddings.register_tokens"),
           ("mask_token", "embeddings.mask_token"),
           ("pos_embed", "embeddings.position_embeddings"),
           ("patch_embed.proj.", "embeddings.patch_embeddings.projection."),
           ("norm.", "layernorm.")]
    BLOCK = [("norm1.", "norm1."), ("norm2.", "norm2."),
             ("attn.query.", "attention.attention.query."),
             ("attn.key.", "attention.attention.key."),
             ("attn.value.", "attention.attention.value."),
             ("attn.proj.", "attention.output.dense."),
             ("ls1.gamma", "layer_scale1.lambda1"), ("ls2.gamma", "layer_scale2.lambda1"),
             ("mlp.fc1.", "mlp.fc1."), ("mlp.fc2.", "mlp.fc2."),
             ("mlp.w12.", "mlp.weights_in."), ("mlp.w3.", "mlp.weights_out.")]
    QKV = ("query", "key", "value")

    @staticmethod
    def _swap_prefix(key, pairs, to_hf):
        for canonical, hf in pairs:
            src, dst = (canonical, hf) if to_hf else (hf, canonical)
            if key.startswith(src):
                return dst + key[len(src):]
        raise KeyError(f"no {'HF' if to_hf else 'canonical'} name for tensor '{key}'")

    @classmethod
    def rename(cls, key, to_hf):
        src, dst = ("blocks.", "encoder.layer.") if to_hf else ("encoder.layer.", "blocks.")
        if key.startswith(src):
            index, rest = key[len(src):].split(".", 1)
            return f"{dst}{index}.{cls._swap_prefix(rest, cls.BLOCK, to_hf)}"
        return cls._swap_prefix(key, cls.TOP, to_hf)

    @classmethod
    def to_stored(cls, canonical):
        stored = {}
        for key, value in canonical.items():
            if ".attn.qkv." in key:  # rows [0:D] q, [D:2D] k, [2D:3D] v
                for part, rows in zip(cls.QKV, value.chunk(3, dim=0)):
                    stored[cls.rename(key.replace(".qkv.", f".{part}."), True)] = rows
            else:
                stored[cls.rename(key, True)] = value
        return stored

    @classmethod
    def to_canonical(cls, stored):
        canonical = {cls.rename(key, False): value for key, value in stored.items()}
        for query in [key for key in canonical if ".attn.query." in key]:
            rows = [canonical.pop(query.replace(".query.", f".{part}.")) for part in cls.QKV]
            canonical[query.replace(".query.", ".qkv.")] = torch.cat(rows, dim=0)
        return canonical


def _with_timm_head(stored, canonical, classifier):
    """timm's `head`: the CLIP projection [E, D] with a zero bias, or a classifier the forward
    ignores (`classifier` = (weight, bias)), or none."""
    if "proj" in canonical:
        stored["head.weight"] = canonical["proj"].T.contiguous()
        stored["head.bias"] = torch.zeros(canonical["proj"].shape[1], dtype=torch.float64)
    elif classifier is not None:
        stored["head.weight"], stored["head.bias"] = classifier
    return stored


class TimmLayout:
    """timm VisionTransformer state dicts (DeiT-III, avg-pool models, vit_*_clip_*,
    vit_*_siglip_*): the canonical names, plus `head.{weight,bias}`. For a CLIP image tower
    timm's head is the projection (`head.weight` = proj^T, `head.bias` = 0); any other head is a
    classifier, which the forward ignores (`classifier` stores one). A SigLIP tower's
    AttentionPoolLatent (global_pool='map') keeps its own names, which are the canonical ones:
    attn_pool.latent [1,1,D], attn_pool.q.{weight [D,D], bias [D]}, attn_pool.kv.{weight [2D,D],
    bias [2D]} (rows [0:D] k, [D:2D] v: timm reshapes kv to (2, heads, head_dim)), attn_pool.proj,
    attn_pool.norm, attn_pool.mlp.{fc1,fc2}; so q and kv travel as they are (HF's in_proj and
    vitreg's attn_pool.qkv are [q; kv], split at row D), checked by `_check_attn_pool`."""
    name = "timm"

    @staticmethod
    def to_stored(canonical, classifier=None):
        _check_attn_pool(canonical)
        stored = {k: v for k, v in canonical.items() if k not in ("proj", "mask_token")}
        return _with_timm_head(stored, canonical, classifier)

    @staticmethod
    def to_canonical(stored, head_is_projection=False):
        canonical = {k: v for k, v in stored.items() if not k.startswith("head.")}
        if head_is_projection:
            canonical["proj"] = stored["head.weight"].T.contiguous()
        _check_attn_pool(canonical)
        return canonical


ATTN_POOL_PARTS = ("q", "kv", "proj", "norm", "mlp.fc1", "mlp.fc2")  # beside attn_pool.latent


def _check_attn_pool(weights):
    """An attention-pool head, if any, is timm's AttentionPoolLatent in full: the latent
    [1,Q,D], q [D,D] and kv [2D,D] (k rows, then v) with their biases, proj, norm, mlp.fc1/fc2.
    Raises ValueError otherwise (e.g. a fused attn_pool.qkv, which no timm model stores)."""
    names = [k for k in weights if k.startswith("attn_pool.")]
    if not names:
        return
    want = {"attn_pool.latent"} | {f"attn_pool.{p}.{k}" for p in ATTN_POOL_PARTS for k in ("weight", "bias")}
    if set(names) != want:
        raise ValueError(f"attention-pool head: tensors {sorted(set(names) ^ want)} differ from "
                         "timm's AttentionPoolLatent (latent, q, kv, proj, norm, mlp.fc1, mlp.fc2)")
    D = weights["attn_pool.latent"].shape[-1]
    shapes = {"attn_pool.q.weight": (D, D), "attn_pool.q.bias": (D,),
              "attn_pool.kv.weight": (2 * D, D), "attn_pool.kv.bias": (2 * D,)}
    for name, shape in shapes.items():
        if tuple(weights[name].shape) != shape:
            raise ValueError(f"{name} has shape {tuple(weights[name].shape)}, expected {shape}")


def _squeeze_leading(t, keep):
    """t with its leading size-1 axes dropped until `keep` axes remain."""
    while t.dim() > keep and t.shape[0] == 1:
        t = t[0]
    return t


class _RenamedBlocks:
    """A layout that renames the canonical names: top-level ones by TOP, and inside each block
    `blocks.i.` ↔ `BLOCKS i.` with the names by BLOCK (pairs of canonical, stored prefixes)."""

    @classmethod
    def rename(cls, key, to_stored):
        src, dst = ("blocks.", cls.BLOCKS) if to_stored else (cls.BLOCKS, "blocks.")
        if key.startswith(src):
            index, rest = key[len(src):].split(".", 1)
            return f"{dst}{index}.{_swap(rest, cls.BLOCK, to_stored)}"
        return _swap(key, cls.TOP, to_stored)


class OpenClipLayout(_RenamedBlocks):
    """OpenAI / OpenCLIP `visual.*` (docs/design.md, "Families"): class_embedding [D], positional_embedding
    [1+M*M,D], conv1 (no bias), ln_pre, transformer.resblocks.i.{ln_1, attn.in_proj_*,
    attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj, ls_1.gamma, ls_2.gamma}, ln_post, proj [D,E].
    Everything outside `visual.` (the text tower) is ignored."""
    name = "open_clip"
    TOP = [("cls_token", "class_embedding"), ("pos_embed", "positional_embedding"),
           ("patch_embed.proj.", "conv1."), ("norm_pre.", "ln_pre."), ("norm.", "ln_post."),
           ("proj", "proj")]
    BLOCK = [("norm1.", "ln_1."), ("norm2.", "ln_2."), ("attn.qkv.weight", "attn.in_proj_weight"),
             ("attn.qkv.bias", "attn.in_proj_bias"), ("attn.proj.", "attn.out_proj."),
             ("mlp.fc1.", "mlp.c_fc."), ("mlp.fc2.", "mlp.c_proj."), ("ls1.gamma", "ls_1.gamma"),
             ("ls2.gamma", "ls_2.gamma")]
    PREFIX, BLOCKS = "visual.", "transformer.resblocks."


    @classmethod
    def to_stored(cls, canonical):
        stored = {}
        for key, value in canonical.items():
            if key == "cls_token":
                value = value.reshape(-1)
            elif key == "pos_embed":
                value = value[0]
            stored[cls.PREFIX + cls.rename(key, True)] = value
        return stored

    @classmethod
    def to_canonical(cls, stored):
        canonical = {}
        for key, value in stored.items():
            if not key.startswith(cls.PREFIX):
                continue  # the text tower
            name = cls.rename(key[len(cls.PREFIX):], False)
            if name == "cls_token":
                value = value.reshape(1, 1, -1)
            elif name == "pos_embed":
                value = value.reshape(1, *value.shape[-2:])
            canonical[name] = value
        return canonical


class HFClipLayout(_RenamedBlocks):
    """HF transformers CLIPModel / CLIPVisionModel(WithProjection): `vision_model.*` and
    `visual_projection.weight` [E,D] (= proj^T, no bias); q/k/v apart. Text-tower tensors
    (text_model.*, text_projection, logit_scale) are ignored."""
    name = "hf_clip"
    TOP = [("cls_token", "vision_model.embeddings.class_embedding"),
           ("pos_embed", "vision_model.embeddings.position_embedding.weight"),
           ("patch_embed.proj.", "vision_model.embeddings.patch_embedding."),
           ("norm_pre.", "vision_model.pre_layrnorm."),
           ("norm.", "vision_model.post_layernorm."),
           ("proj", "visual_projection.weight")]
    BLOCK = [("norm1.", "layer_norm1."), ("norm2.", "layer_norm2."),
             ("attn.q.", "self_attn.q_proj."), ("attn.k.", "self_attn.k_proj."),
             ("attn.v.", "self_attn.v_proj."), ("attn.proj.", "self_attn.out_proj."),
             ("mlp.fc1.", "mlp.fc1."), ("mlp.fc2.", "mlp.fc2.")]
    BLOCKS = "vision_model.encoder.layers."


    @classmethod
    def to_stored(cls, canonical):
        stored = {}
        for key, value in canonical.items():
            if ".attn.qkv." in key:
                for part, rows in zip("qkv", value.chunk(3, dim=0)):
                    stored[cls.rename(key.replace(".qkv.", f".{part}."), True)] = rows
                continue
            if key == "cls_token":
                value = value.reshape(-1)
            elif key == "pos_embed":
                value = value[0]
            elif key == "proj":
                value = value.T.contiguous()
            stored[cls.rename(key, True)] = value
        return stored

    @classmethod
    def to_canonical(cls, stored):
        canonical = {}
        for key, value in stored.items():
            if not (key.startswith("vision_model.") or key == "visual_projection.weight"):
                continue  # the text tower
            if key == "vision_model.embeddings.position_ids":
                continue
            name = cls.rename(key, False)
            if name == "cls_token":
                value = value.reshape(1, 1, -1)
            elif name == "pos_embed":
                value = value.reshape(1, *value.shape[-2:])
            elif name == "proj":
                value = value.T.contiguous()
            canonical[name] = value
        return _merge_qkv(canonical)


def _merge_qkv(canonical):
    """blocks.i.attn.{q,k,v}.* (HF's separate projections) -> blocks.i.attn.qkv.* (rows q, k, v)."""
    for query in [key for key in canonical if ".attn.q." in key]:
        rows = [canonical.pop(query.replace(".attn.q.", f".attn.{part}.")) for part in "qkv"]
        canonical[query.replace(".attn.q.", ".attn.qkv.")] = torch.cat(rows, dim=0)
    return canonical


class HFSiglipLayout(_RenamedBlocks):
    """HF transformers SiglipVisionModel, or the vision tower of a SiglipModel (docs/design.md, "Families"):
    HF CLIP's names without class_embedding and pre_layrnorm; the conv patch embedding has a
    bias; position_embedding.weight [M*M, D] has no class row; post_layernorm normalizes every
    token; the attention-pool head vision_model.head.* becomes timm's AttentionPoolLatent names:
    probe [1,1,D] = attn_pool.latent, attention.in_proj_{weight,bias} rows [0:D] = attn_pool.q,
    rows [D:3D] (k, then v) = attn_pool.kv, attention.out_proj = attn_pool.proj, layernorm =
    attn_pool.norm, mlp.{fc1,fc2} = attn_pool.mlp.{fc1,fc2}. Everything outside vision_model.
    (text_model.*, logit_scale, logit_bias) is ignored."""
    name = "hf_siglip"
    TOP = [("pos_embed", "vision_model.embeddings.position_embedding.weight"),
           ("patch_embed.proj.", "vision_model.embeddings.patch_embedding."),
           ("norm.", "vision_model.post_layernorm."),
           ("attn_pool.latent", "vision_model.head.probe"),
           ("attn_pool.proj.", "vision_model.head.attention.out_proj."),
           ("attn_pool.norm.", "vision_model.head.layernorm."),
           ("attn_pool.mlp.fc1.", "vision_model.head.mlp.fc1."),
           ("attn_pool.mlp.fc2.", "vision_model.head.mlp.fc2.")]
    BLOCK = HFClipLayout.BLOCK
    BLOCKS = HFClipLayout.BLOCKS
    IN_PROJ = "vision_model.head.attention.in_proj_"  # + weight | bias

    @classmethod
    def to_stored(cls, canonical):
        stored = {}
        for key, value in canonical.items():
            if ".attn.qkv." in key:
                for part, rows in zip("qkv", value.chunk(3, dim=0)):
                    stored[cls.rename(key.replace(".qkv.", f".{part}."), True)] = rows
            elif key.startswith(("attn_pool.q.", "attn_pool.kv.")):
                continue  # below: one in_proj
            elif key == "pos_embed":
                stored[cls.rename(key, True)] = value[0]
            else:
                stored[cls.rename(key, True)] = value
        for kind in ("weight", "bias"):
            if f"attn_pool.q.{kind}" in canonical:
                stored[cls.IN_PROJ + kind] = torch.cat([canonical[f"attn_pool.q.{kind}"],
                                                        canonical[f"attn_pool.kv.{kind}"]], dim=0)
        return stored

    @classmethod
    def to_canonical(cls, stored):
        canonical = {}
        for key, value in stored.items():
            if not key.startswith("vision_model.") or key == "vision_model.embeddings.position_ids":
                continue  # the text tower, logit_scale / logit_bias; a buffer
            if key.startswith(cls.IN_PROJ):
                kind = key[len(cls.IN_PROJ):]
                assert kind in ("weight", "bias") and value.shape[0] % 3 == 0, (key, tuple(value.shape))
                dim = value.shape[0] // 3
                canonical[f"attn_pool.q.{kind}"] = value[:dim]
                canonical[f"attn_pool.kv.{kind}"] = value[dim:]
                continue
            name = cls.rename(key, False)
            if name == "pos_embed":
                value = value.reshape(1, *value.shape[-2:])
            canonical[name] = value
        return _merge_qkv(canonical)


class HFDinov3Layout(_RenamedBlocks):
    """HF transformers DINOv3ViTModel (docs/design.md, "Families"): embeddings.{cls_token [1,1,D],
    mask_token [1,1,D] (canonical [1,D]), register_tokens [1,R,D], patch_embeddings.{weight,bias}}
    (the conv itself: no `.projection`), no position embedding; per block layer.i.{norm1,
    attention.{q,k,v,o}_proj, layer_scale1.lambda1, norm2, mlp.*, layer_scale2.lambda1}; the final
    `norm`. q/k/v travel as blocks.i.attn.{q,k,v} inside this adapter and are fused into
    blocks.i.attn.qkv (rows q, k, v): a projection saved without a bias (key_bias false in the
    released models; query_bias / value_bias may be false too) gets zero rows in the fused bias,
    which is absent only when all three are. The MLP: mlp.{up_proj, down_proj} = mlp.{fc1, fc2}
    (down(act(up(x)))), or gated (use_gated_mlp) mlp.{gate_proj, up_proj, down_proj}:
    mlp.w12 = [gate_proj; up_proj] (so swiglu's silu(x1) * x2 is silu(gate(x)) * up(x)) and
    mlp.w3 = down_proj. rope_embeddings.* (inv_freq, a non-persistent buffer) is ignored if a
    file holds it."""
    name = "hf_dinov3"
    TOP = [("cls_token", "embeddings.cls_token"),
           ("register_tokens", "embeddings.register_tokens"),
           ("mask_token", "embeddings.mask_token"),
           ("patch_embed.proj.", "embeddings.patch_embeddings."),
           ("norm.", "norm.")]
    # mlp.gate only inside this adapter (the gated MLP's first half of w12)
    BLOCK = [("norm1.", "norm1."), ("norm2.", "norm2."),
             ("attn.q.", "attention.q_proj."), ("attn.k.", "attention.k_proj."),
             ("attn.v.", "attention.v_proj."), ("attn.proj.", "attention.o_proj."),
             ("ls1.gamma", "layer_scale1.lambda1"), ("ls2.gamma", "layer_scale2.lambda1"),
             ("mlp.gate.", "mlp.gate_proj."), ("mlp.fc1.", "mlp.up_proj."),
             ("mlp.fc2.", "mlp.down_proj.")]
    BLOCKS = "layer."

    @classmethod
    def to_stored(cls, canonical, key_bias=False):
        """`key_bias` False (the released models): the k rows of every qkv bias must be zero and
        no k_proj.bias is written, as transformers saves a key_bias=False model."""
        stored = {}
        for key, value in canonical.items():
            if ".attn.qkv." in key:
                for part, rows in zip("qkv", value.chunk(3, dim=0)):
                    if part == "k" and key.endswith(".bias") and not key_bias:
                        assert bool((rows == 0).all()), f"{key}: key_bias false but the k rows are not 0"
                        continue
                    stored[cls.rename(key.replace(".qkv.", f".{part}."), True)] = rows
            elif ".mlp.w12." in key:  # [gate; up]
                gate, up = value.chunk(2, dim=0)
                stored[cls.rename(key.replace(".w12.", ".gate."), True)] = gate
                stored[cls.rename(key.replace(".w12.", ".fc1."), True)] = up
            elif ".mlp.w3." in key:
                stored[cls.rename(key.replace(".w3.", ".fc2."), True)] = value
            elif key == "mask_token":
                stored[cls.rename(key, True)] = value.reshape(1, 1, -1)
            elif key == "pos_embed":
                raise ValueError("DINOv3 has no absolute position embedding")
            else:
                stored[cls.rename(key, True)] = value
        return stored

    @classmethod
    def to_canonical(cls, stored):
        canonical = {}
        for key, value in stored.items():
            if key.startswith("rope_embeddings."):
                continue  # inv_freq: a buffer the forward recomputes
            name = cls.rename(key, False)
            if name == "mask_token":
                value = value.reshape(1, -1)
            canonical[name] = value
        for gate in [key for key in canonical if ".mlp.gate." in key]:
            up = gate.replace(".gate.", ".fc1.")
            canonical[gate.replace(".gate.", ".w12.")] = torch.cat([canonical.pop(gate),
                                                                   canonical.pop(up)], dim=0)
            down = gate.replace(".gate.", ".fc2.")
            if down in canonical:
                canonical[down.replace(".fc2.", ".w3.")] = canonical.pop(down)
        for query in [key for key in canonical if key.endswith(".attn.q.weight")]:
            block = query[:-len(".attn.q.weight")]
            rows = [canonical.pop(f"{block}.attn.{part}.weight") for part in "qkv"]
            canonical[f"{block}.attn.qkv.weight"] = torch.cat(rows, dim=0)
            biases = [canonical.pop(f"{block}.attn.{part}.bias", None) for part in "qkv"]
            if any(b is not None for b in biases):
                dim = rows[0].shape[0]
                canonical[f"{block}.attn.qkv.bias"] = torch.cat(
                    [b if b is not None else torch.zeros(dim, dtype=rows[0].dtype) for b in biases])
        return canonical


class Dinov3HubLayout:
    """facebookresearch/dinov3 torch-hub checkpoints (`torch.hub.load('facebookresearch/dinov3',
    'dinov3_vits16')`: torch.save of DinoVisionTransformer.state_dict(), no config file): the
    canonical names except storage_tokens [1,R,D] (= register_tokens) and the gated MLP
    (SwiGLUFFN) mlp.{w1, w2, w3}: w3(silu(w1(x)) * w2(x)), so mlp.w12 = [w1; w2] (HF's gate_proj,
    up_proj) and w3 keeps its name; the GELU MLP is mlp.{fc1, fc2}. Two buffers: per block
    attn.qkv.bias_mask [3D] (LinearKMaskedBias: the forward uses qkv.bias * bias_mask; ones with
    the k third [D:2D] zero, so the stored k third of the bias does not count) and
    rope_embed.periods [head_dim/4] (persistent; periods_j = θ^(4j/head_dim) = 1/inv_freq_j: the
    only record of the head width and θ in the file). No pos_embed. to_canonical multiplies every
    qkv bias by its mask (a bias without one is used as stored) and drops the periods; to_stored
    writes the mask, the periods (`heads`, `rope_theta`) and, where `masked_k_bias` names a qkv
    bias, those values into its masked k third (the canonical k rows must be 0: that is all the
    mask lets through). Names come out in the order DinoVisionTransformer.state_dict() gives."""
    name = "dinov3_hub"
    BLOCK_ORDER = ("norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.qkv.bias_mask",
                   "attn.proj.weight", "attn.proj.bias", "ls1.gamma", "norm2.weight", "norm2.bias",
                   "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias",
                   "mlp.w1.weight", "mlp.w1.bias", "mlp.w2.weight", "mlp.w2.bias", "mlp.w3.weight",
                   "mlp.w3.bias", "ls2.gamma")
    TOP_ORDER = ("cls_token", "storage_tokens", "mask_token", "patch_embed.proj.weight",
                 "patch_embed.proj.bias", "rope_embed.periods")

    @staticmethod
    def periods(head_dim, theta):
        """rope_embed.periods [head_dim/4], float64: θ^(4j/head_dim), j = 0 .. head_dim/4 - 1."""
        return theta ** (torch.arange(head_dim // 4, dtype=torch.float64) * 4 / head_dim)

    @classmethod
    def _rank(cls, key):
        if key.startswith("blocks."):
            index, rest = key[len("blocks."):].split(".", 1)
            return (1, int(index), cls.BLOCK_ORDER.index(rest))
        if key in cls.TOP_ORDER:
            return (0, cls.TOP_ORDER.index(key), 0)
        return (2, ("norm.weight", "norm.bias").index(key), 0) if key.startswith("norm.") else (3, 0, key)

    @classmethod
    def to_stored(cls, canonical, heads, rope_theta=100.0, masked_k_bias=None):
        if "pos_embed" in canonical:
            raise ValueError("DINOv3 has no absolute position embedding")
        dim = canonical["patch_embed.proj.weight"].shape[0]
        stored = {"rope_embed.periods": cls.periods(dim // heads, rope_theta)}
        for key, value in canonical.items():
            if key == "register_tokens":
                stored["storage_tokens"] = value
            elif key.endswith(".attn.qkv.bias"):
                assert bool((value[dim:2 * dim] == 0).all()), f"{key}: the k rows are masked, so they must be 0"
                mask = torch.ones_like(value)
                mask[dim:2 * dim] = 0
                value = value.clone()
                if masked_k_bias is not None and key in masked_k_bias:
                    value[dim:2 * dim] = masked_k_bias[key]
                stored[key], stored[key + "_mask"] = value, mask
            elif ".mlp.w12." in key:  # [w1 (gate); w2 (up)]
                w1, w2 = value.chunk(2, dim=0)
                stored[key.replace(".w12.", ".w1.")] = w1
                stored[key.replace(".w12.", ".w2.")] = w2
            else:
                stored[key] = value
        return {key: stored[key] for key in sorted(stored, key=cls._rank)}

    @staticmethod
    def to_canonical(stored):
        canonical = {}
        for key, value in stored.items():
            if key == "rope_embed.periods" or key.endswith(".attn.qkv.bias_mask"):
                continue  # the periods: recomputed from θ; the mask: applied below
            if key == "storage_tokens":
                canonical["register_tokens"] = value
            elif key.endswith(".attn.qkv.bias") and key + "_mask" in stored:
                canonical[key] = value * stored[key + "_mask"].to(value.dtype)
            else:
                canonical[key] = value
        for w1 in [key for key in canonical if ".mlp.w1." in key]:
            w2 = w1.replace(".w1.", ".w2.")
            canonical[w1.replace(".w1.", ".w12.")] = torch.cat([canonical.pop(w1), canonical.pop(w2)], dim=0)
        return canonical


class TimmEvaLayout(_RenamedBlocks):
    """timm `Eva` state dicts (EVA-01, EVA-02, the EVA-CLIP image towers; docs/design.md, "Families"): the
    canonical top-level names (cls_token, pos_embed [1,1+M*M,D] with the class row,
    patch_embed.proj.*, norm.* (global_pool 'token') or fc_norm.* (global_pool 'avg')), and per
    block norm1, norm2, attn.proj, attn.norm (scale_attn_inner), mlp.norm (scale_mlp),
    gamma_1 / gamma_2 (= ls1.gamma / ls2.gamma, init_values set). Two attention layouts:
      fused (qkv_fused=True, S/Ti): attn.qkv.weight [3D,D] without a bias, attn.q_bias [D] and
        attn.v_bias [D] (the k bias is a non-persistent zero buffer: absent; read when present);
      split (qkv_fused=False, B/L): attn.q_proj.{weight,bias}, attn.k_proj.weight (no bias),
        attn.v_proj.{weight,bias}.
    Either way the canonical blocks.i.attn.qkv.bias is [q; 0; v] (the k rows must be 0 to store).
    Three MLPs:
      packed SwiGLU (GluMlp, gate_last=False, S/Ti): mlp.fc1 [2H,D] = [gate; value] = mlp.w12
        as it is, mlp.fc2 [D,H] = mlp.w3 (fc1 twice as wide as fc2's input tells it);
      separate SwiGLU (SwiGLU, scale_mlp, B/L): mlp.fc1_g [H,D] (gate), mlp.fc1_x [H,D] (value):
        mlp.w12 = [fc1_g; fc1_x], mlp.fc2 = mlp.w3, and the sub-LayerNorm mlp.norm [H];
      plain (EVA-01, GELU): mlp.fc1 / mlp.fc2 as the canonical names.
    `head.{weight [E,D], bias}`: the EVA-CLIP projection where `head_is_projection` (canonical
    proj [D,E] = head.weight^T; stored with a zero bias), else a classifier the forward ignores.
    Buffers named rope.* (none in timm's files: non-persistent) are ignored."""
    name = "timm_eva"
    TOP = [("cls_token", "cls_token"), ("pos_embed", "pos_embed"),
           ("patch_embed.proj.", "patch_embed.proj."), ("norm.", "norm."), ("fc_norm.", "fc_norm.")]
    # attn.q/k/v and mlp.gate/value only inside this adapter (the split layouts' parts)
    BLOCK = [("norm1.", "norm1."), ("norm2.", "norm2."), ("attn.proj.", "attn.proj."),
             ("attn.norm.", "attn.norm."), ("attn.qkv.weight", "attn.qkv.weight"),
             ("attn.q_bias", "attn.q_bias"), ("attn.k_bias", "attn.k_bias"),
             ("attn.v_bias", "attn.v_bias"), ("attn.q.", "attn.q_proj."),
             ("attn.k.", "attn.k_proj."), ("attn.v.", "attn.v_proj."),
             ("ls1.gamma", "gamma_1"), ("ls2.gamma", "gamma_2"), ("mlp.norm.", "mlp.norm."),
             ("mlp.gate.", "mlp.fc1_g."), ("mlp.value.", "mlp.fc1_x."), ("mlp.w12.", "mlp.fc1."),
             ("mlp.w3.", "mlp.fc2."), ("mlp.fc1.", "mlp.fc1."), ("mlp.fc2.", "mlp.fc2.")]
    BLOCKS = "blocks."

    @staticmethod
    def stored_options(stored):
        """The to_stored options that give back `stored`'s layout: qkv_fused (no q_proj) and
        packed_mlp (no fc1_g)."""
        return {"qkv_fused": "blocks.0.attn.q_proj.weight" not in stored,
                "packed_mlp": "blocks.0.mlp.fc1_g.weight" not in stored}

    @classmethod
    def to_stored(cls, canonical, qkv_fused=True, packed_mlp=True, classifier=None):
        """`qkv_fused`: attn.qkv + q_bias / v_bias (else q_proj / k_proj / v_proj); `packed_mlp`:
        SwiGLU as one mlp.fc1 (else fc1_g / fc1_x). `classifier` (weight, bias): a head that is
        no projection (never read). mask_token is not stored (timm's filter drops it)."""
        stored = {}
        for key, value in canonical.items():
            if key in ("mask_token", "proj"):
                continue
            if key == "register_tokens":
                raise ValueError("timm Eva (EVA-01 / EVA-02) has no register tokens")
            if key.endswith(".attn.qkv.bias"):
                q, k, v = value.chunk(3, dim=0)
                assert bool((k == 0).all()), f"{key}: timm Eva has no k bias, so the k rows must be 0"
                if qkv_fused:
                    stored[cls.rename(key.replace(".qkv.bias", ".q_bias"), True)] = q
                    stored[cls.rename(key.replace(".qkv.bias", ".v_bias"), True)] = v
                else:
                    stored[cls.rename(key.replace(".qkv.", ".q."), True)] = q
                    stored[cls.rename(key.replace(".qkv.", ".v."), True)] = v
            elif key.endswith(".attn.qkv.weight") and not qkv_fused:
                for part, rows in zip("qkv", value.chunk(3, dim=0)):
                    stored[cls.rename(key.replace(".qkv.", f".{part}."), True)] = rows
            elif ".mlp.w12." in key and not packed_mlp:
                gate, x = value.chunk(2, dim=0)
                stored[cls.rename(key.replace(".w12.", ".gate."), True)] = gate
                stored[cls.rename(key.replace(".w12.", ".value."), True)] = x
            else:
                stored[cls.rename(key, True)] = value
        return _with_timm_head(stored, canonical, classifier)

    @classmethod
    def to_canonical(cls, stored, head_is_projection=False):
        canonical, packed = {}, {}
        for key, value in stored.items():
            if key.startswith("head."):
                continue  # below: the projection, or a classifier
            if key.startswith("rope.") or ".rope." in key:
                continue  # rotary tables: non-persistent buffers the forward recomputes
            canonical[cls.rename(key, False)] = value
        for fc1 in [key for key in canonical if key.endswith(".mlp.w12.weight")]:
            block = fc1[:-len(".mlp.w12.weight")]
            fc2 = canonical[block + ".mlp.w3.weight"]
            if canonical[fc1].shape[0] != 2 * fc2.shape[1]:  # EVA-01's GELU Mlp: fc1 / fc2
                for part in ("weight", "bias"):
                    for mine, theirs in (("w12", "fc1"), ("w3", "fc2")):
                        name = f"{block}.mlp.{mine}.{part}"
                        if name in canonical:
                            canonical[f"{block}.mlp.{theirs}.{part}"] = canonical.pop(name)
        for gate in [key for key in canonical if ".mlp.gate." in key]:
            canonical[gate.replace(".gate.", ".w12.")] = torch.cat(
                [canonical.pop(gate), canonical.pop(gate.replace(".gate.", ".value."))], dim=0)
        for weight in [key for key in canonical if key.endswith(".attn.q.weight")]:
            block = weight[:-len(".attn.q.weight")]
            canonical[f"{block}.attn.qkv.weight"] = torch.cat(
                [canonical.pop(f"{block}.attn.{part}.weight") for part in "qkv"], dim=0)
            for part in "qkv":
                packed.setdefault(block, {})[part] = canonical.pop(f"{block}.attn.{part}.bias", None)
        for q in [key for key in canonical if key.endswith(".attn.q_bias")]:
            block = q[:-len(".attn.q_bias")]
            packed[block] = {part: canonical.pop(f"{block}.attn.{part}_bias", None) for part in "qkv"}
        for block, parts in packed.items():
            if any(b is not None for b in parts.values()):
                dim = canonical[f"{block}.attn.qkv.weight"].shape[0] // 3
                canonical[f"{block}.attn.qkv.bias"] = torch.cat(
                    [b if b is not None else torch.zeros(dim, dtype=torch.float64) for b in parts.values()])
        if head_is_projection:
            canonical["proj"] = stored["head.weight"].T.contiguous()
        return canonical


def _is_timm_eva(names):
    """timm Eva tensors: q_bias / q_proj / fc1_g / gamma_1 in block 0, or (given the tensors) a
    packed SwiGLU fc1 twice as wide as fc2's input."""
    if any(f"blocks.0.{k}" in names for k in ("attn.q_bias", "attn.q_proj.weight", "mlp.fc1_g.weight",
                                               "gamma_1")):
        return True
    if not isinstance(names, dict):
        return False
    fc1, fc2 = names.get("blocks.0.mlp.fc1.weight"), names.get("blocks.0.mlp.fc2.weight")
    return (hasattr(fc1, "shape") and hasattr(fc2, "shape") and len(fc1.shape) == 2
            and len(fc2.shape) == 2 and fc1.shape[0] == 2 * fc2.shape[1])


def _swap(key, pairs, to_stored):
    """Translate `key` by the first pair whose side matches: a name ending in '.' as a prefix,
    any other exactly."""
    for canonical, stored in pairs:
        src, dst = (canonical, stored) if to_stored else (stored, canonical)
        if (key.startswith(src) if src.endswith(".") else key == src):
            return dst + key[len(src):]
    raise KeyError(f"no {'stored' if to_stored else 'canonical'} name for tensor '{key}'")


LAYOUTS = {layout.name: layout for layout in (Dinov2Layout, TimmRegLayout, HFLayout, TimmLayout,
                                              OpenClipLayout, HFClipLayout, HFSiglipLayout,
                                              HFDinov3Layout, Dinov3HubLayout, TimmEvaLayout)}
SIGLIP_MODEL_TYPES = ("siglip", "siglip_vision_model")  # SiglipModel, SiglipVisionModel
DINOV3_MODEL_TYPES = ("dinov3_vit",)  # DINOv3ViTModel


def detect_layout(names, model_type=None):
    """The layout of a checkpoint from its tensor names (and, for HF's vision_model.* towers,
    config.json's model_type): HF SigLIP has no class_embedding, and the attention-pool probe
    or a SigLIP model_type; HF CLIP the rest. HF DINOv3 by its conv patch embedding
    embeddings.patch_embeddings.weight (HF DINOv2's is patch_embeddings.projection.weight) or a
    dinov3_vit model_type; a dinov3_vit model_type over other tensors is refused."""
    if "embeddings.patch_embeddings.weight" in names or model_type in DINOV3_MODEL_TYPES:
        if "embeddings.patch_embeddings.weight" not in names or "layer.0.attention.q_proj.weight" not in names:
            raise ValueError(f"config.json: model_type '{model_type}' but the tensors are not "
                             "DINOv3ViTModel's (embeddings.patch_embeddings.weight, "
                             "layer.i.attention.q_proj)")
        return HFDinov3Layout
    if "embeddings.cls_token" in names:
        return HFLayout
    if "vision_model.embeddings.patch_embedding.weight" in names:
        has_class = "vision_model.embeddings.class_embedding" in names
        if model_type in SIGLIP_MODEL_TYPES and has_class:
            raise ValueError(f"config.json: model_type '{model_type}' but the tensors have a "
                             "class_embedding (SigLIP has none)")
        if not has_class and ("vision_model.head.probe" in names or model_type in SIGLIP_MODEL_TYPES):
            return HFSiglipLayout
        return HFClipLayout
    if "visual.conv1.weight" in names:
        return OpenClipLayout
    if _is_timm_eva(names):
        return TimmEvaLayout
    if "reg_token" in names:
        return TimmRegLayout
    return Dinov2Layout


# ---------------------------------------------------------------------------------------------
# 3. Config resolution and loading
# ---------------------------------------------------------------------------------------------

ATTENTION_KINDS = ("softmax", "softmax1", "sink")
POS_INTERP_MODES = ("offset", "antialias", "size")


IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)  # OpenAI's (docs/design.md, "Families")
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
SIGLIP_MEAN = SIGLIP_STD = (0.5, 0.5, 0.5)  # SiglipImageProcessor's defaults
FAMILIES = ("dinov2", "timm", "clip", "siglip", "dinov3", "eva")
ACTIVATIONS = ("gelu", "quick_gelu", "swiglu", "gelu_tanh")
POOLS = ("avg", "map")
POSITIONS = ("learned", "rope_dinov3", "rope_eva")
EVA_ROPE_THETA = 10000.0     # timm RotaryEmbeddingCat's temperature (not in any config file)
EVA_REF_GRID = (16, 16)      # ref_feat_shape of every timm eva02_* model


@dataclass(frozen=True)
class Config:
    dim: int
    depth: int
    heads: int
    patch: int
    registers: int
    grid: int                   # native (stored) position-embedding grid M
    attention: str = "softmax"  # softmax | softmax1 | sink
    pos_interp: str = "offset"  # offset | antialias | size
    eps: float = 1e-6
    mlp: str = "gelu"           # the activation: gelu | quick_gelu (x * sigmoid(1.702 x)) | swiglu
                                # | gelu_tanh (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))
    # The family-neutral facts of docs/design.md, "Families" (timm VisionTransformer's flags);
    # defaults: DINOv2's.
    family: str = "dinov2"      # dinov2 | timm | clip | siglip: where the architecture comes from
    class_token: bool = True    # tokens start with a class token
    pos_embed_class: bool = True  # pos_embed has the class token's row (False: no_embed_class)
    pre_norm: bool = False      # norm_pre / ln_pre after the positions, before the blocks
    final_norm: bool = True     # `norm` over every token (False: identity)
    fc_norm: bool = False       # pooled = fc_norm(mean of the patch tokens)
    proj_dim: int = 0           # E of proj [D,E]; embedding = final-normed CLS @ proj
    mean: tuple = IMAGENET_MEAN  # preprocessing: normalization, and the eval transform
    std: tuple = IMAGENET_STD   # (short side floor(input_size / crop_pct), center crop input_size)
    input_size: int = 224
    crop_pct: float = 0.875
    pool: str = "avg"           # pooled: avg (mean of the patch tokens, then fc_norm) | map (the
                                # attention-pool head attn_pool.* on every final-normed token)
    eval_squash: bool = False   # eval transform: resize to input_size x input_size, no crop
                                # (SigLIP, DINOv3; crop_pct then 1); False: short side, center crop
    positions: str = "learned"  # learned: pos_embed, resampled by pos_interp | rope_dinov3: no
                                # pos_embed, DINOv3's 2D axial RoPE on the patch tokens' q and k
                                # (pos_interp then unused; `rope_dinov3_tables`)
    rope_theta: float = 0.0     # rope_dinov3's base θ (HF rope_theta, 100); rope_eva's temperature
                                # (10000); 0 with learned positions
    # Appended for EVA-02 (docs/design.md, "Families"); the defaults leave every earlier model as it
    # was.
    rope_ref_grid: tuple = (0, 0)  # rope_eva: timm's ref_feat_shape (Rh, Rw): positions
                                # arange(n) / n * R per axis; (0, 0) otherwise
    mlp_norm: bool = False      # a LayerNorm mlp.norm [H] on the MLP's hidden activation before
                                # its second linear (timm Eva scale_mlp)
    attn_norm: bool = False     # a LayerNorm attn.norm [D] on the attention output (heads merged)
                                # before attn.proj (timm Eva scale_attn_inner, EVA-CLIP)

    def __post_init__(self):
        assert self.attention in ATTENTION_KINDS, self.attention
        assert self.pos_interp in POS_INTERP_MODES, self.pos_interp
        assert self.mlp in ACTIVATIONS, self.mlp
        assert self.family in FAMILIES, self.family
        assert self.pool in POOLS, self.pool
        assert self.dim % self.heads == 0, (self.dim, self.heads)
        assert self.positions in POSITIONS, self.positions
        if self.positions in ("rope_dinov3", "rope_eva"):
            assert self.rope_theta > 0, self.rope_theta
            assert (self.dim // self.heads) % 4 == 0, f"RoPE needs head_dim % 4 == 0, not {self.dim // self.heads}"
        else:
            assert self.rope_theta == 0, "rope_theta without rotary positions"
        assert isinstance(self.rope_ref_grid, tuple) and len(self.rope_ref_grid) == 2, self.rope_ref_grid
        if self.positions == "rope_eva":
            assert min(self.rope_ref_grid) > 0, f"rope_eva needs a reference grid, not {self.rope_ref_grid}"
        else:
            assert self.rope_ref_grid == (0, 0), "rope_ref_grid without rope_eva positions"


# The fields a fixture index records only where they differ from DINOv2's defaults.
FAMILY_FIELDS = ("family", "class_token", "pos_embed_class", "pre_norm", "final_norm", "fc_norm",
                 "proj_dim", "mean", "std", "input_size", "crop_pct", "pool", "eval_squash",
                 "positions", "rope_theta", "rope_ref_grid", "mlp_norm", "attn_norm")


def config_record(cfg):
    """The Config as a fixture index records it: every field, except the FAMILY_FIELDS that
    keep their defaults (so a DINOv2 model's record reads as it always has)."""
    record = dataclasses.asdict(cfg)
    defaults = {f.name: f.default for f in dataclasses.fields(Config) if f.name in FAMILY_FIELDS}
    for key, value in defaults.items():
        if record[key] == value or (isinstance(value, tuple) and tuple(record[key]) == value):
            del record[key]
    return record


def default_pos_interp(layout, registers, hf_model_type=None, family="dinov2", timm_hub=False):
    """docs/design.md, "Reference semantics" and "Families": dinov2 without registers -> offset; dinov2 register models and timm ->
    antialias; HF Dinov2Model -> size; HF Dinov2WithRegistersModel -> antialias; CLIP: OpenCLIP's
    resize_pos_embed antialiases (antialias), HF CLIP's interpolate_pos_encoding does not (size),
    timm's CLIP towers are timm (antialias); HF SigLIP's interpolate_pos_encoding does not
    antialias either (size). HF DINOv3 has no position table to resample: `size`, the HF folders'
    value, is recorded and never used. timm Eva (EVA-01 / EVA-02): timm's resample_abs_pos_embed,
    bicubic with antialias."""
    if layout is TimmEvaLayout:
        return "antialias"
    if layout is HFDinov3Layout:
        return "size"
    if layout is HFLayout:
        return "antialias" if hf_model_type == "dinov2_with_registers" else "size"
    if layout in (HFClipLayout, HFSiglipLayout):
        return "size"
    if layout is OpenClipLayout or family != "dinov2" or timm_hub:
        return "antialias"
    if layout is TimmRegLayout or registers > 0:
        return "antialias"
    return "offset"


def infer_family(canonical, layout):
    """The family where no config names it: CLIP layouts are CLIP; timm's vit_*_clip_* have
    norm_pre and a patch embedding without bias; a timm-only feature (norm_pre, fc_norm, no class
    token, no class position, no qkv / patch bias, no final norm) says timm; else DINOv2. HF
    SigLIP's layout is SigLIP, HF DINOv3's DINOv3, timm Eva's EVA."""
    if layout is TimmEvaLayout:
        return "eva"
    if layout is HFSiglipLayout:
        return "siglip"
    if layout is HFDinov3Layout:
        return "dinov3"
    if layout in (OpenClipLayout, HFClipLayout):
        return "clip"
    if layout in (HFLayout, TimmRegLayout):
        return "dinov2"
    pre_norm = "norm_pre.weight" in canonical
    patch_bias = "patch_embed.proj.bias" in canonical
    if pre_norm and not patch_bias:
        return "clip"
    n_pos = canonical["pos_embed"].shape[1]
    class_pos = "cls_token" in canonical and math.isqrt(n_pos - 1) ** 2 == n_pos - 1
    timm_only = (pre_norm, "fc_norm.weight" in canonical, "cls_token" not in canonical, not class_pos,
                 "blocks.0.attn.qkv.bias" not in canonical, not patch_bias, "norm.weight" not in canonical)
    return "timm" if any(timm_only) else "dinov2"


def config_from_weights(canonical, layout, hints):
    """Resolve a Config from canonical weight shapes plus `hints` (vitreg metadata keys, or
    the values a config file gives, already translated to vitreg's key names). Without a
    pos_embed the positions must be rotary (hints `positions` rope_dinov3, `rope_theta`); the
    native grid M is then hints' `grid` (image_size // patch_size), 224 // patch without one.
    rope_eva (EVA-02) keeps its learned pos_embed (the grid from it) and adds the rotation:
    `rope_theta` (default 10000) and `rope_ref_grid` (default 16 x 16). An EVA model (family eva)
    whose hints name no positions is EVA-02 (rope_eva, 16 x 16) when its MLP is SwiGLU, else
    EVA-01 (learned): timm stores no rotary tensor. mlp_norm / attn_norm from the tensors
    (blocks.0.mlp.norm / blocks.0.attn.norm)."""
    dim = canonical["patch_embed.proj.weight"].shape[0]
    patch = canonical["patch_embed.proj.weight"].shape[-1]
    registers = canonical["register_tokens"].shape[1] if "register_tokens" in canonical else 0
    class_token = "cls_token" in canonical
    eva = layout is TimmEvaLayout or hints.get("family") == "eva"
    swiglu = "blocks.0.mlp.w12.weight" in canonical
    positions = hints.get("positions") or ("rope_eva" if eva and swiglu else "learned")
    if positions == "learned" or (positions == "rope_eva" and "pos_embed" in canonical):
        if "pos_embed" not in canonical:
            raise ValueError("no pos_embed and no rotary positions: the model has no positions")
        n_rows = canonical["pos_embed"].shape[1]
        # pos_embed: 1 + M*M rows (the class token's first) or M*M (timm no_embed_class)
        if class_token and n_rows > 1 and math.isqrt(n_rows - 1) ** 2 == n_rows - 1:
            pos_embed_class, n_pos = True, n_rows - 1
        else:
            pos_embed_class, n_pos = False, n_rows
        grid = math.isqrt(n_pos)
        assert grid * grid == n_pos, f"pos_embed holds {n_pos} patch positions, not a square grid"
    else:
        if "pos_embed" in canonical:
            raise ValueError(f"positions {positions} but the checkpoint has a pos_embed")
        pos_embed_class, grid = False, int(hints.get("grid", 224 // patch))
    if "patch_size" in hints:
        assert int(hints["patch_size"]) == patch, "patch_size disagrees with patch_embed weight"
    if "num_registers" in hints:
        assert int(hints["num_registers"]) == registers, "num_registers disagrees with tokens"
    if "grid" in hints:
        assert int(hints["grid"]) == grid, "image size disagrees with the position embeddings"
    if "dim" in hints:
        assert int(hints["dim"]) == dim, "hidden size disagrees with cls_token"
    has_sinks = any(k.endswith(".attn.sinks") for k in canonical)
    depth = block_count(canonical)
    if "depth" in hints:
        assert int(hints["depth"]) == depth, "layer count disagrees with the blocks stored"
    family = hints.get("family") or infer_family(canonical, layout)
    if family == "siglip" and "timm_hub" in hints and class_token:
        raise ValueError("config.json: a timm SigLIP architecture (no class token) beside tensors "
                         "with a cls_token")
    proj_dim = canonical["proj"].shape[1] if "proj" in canonical else 0
    if "proj_dim" in hints and proj_dim:
        assert int(hints["proj_dim"]) == proj_dim, "projection_dim disagrees with the projection"
    clip, siglip, dinov3 = family == "clip", family == "siglip", family == "dinov3"
    eva = family == "eva"
    native = grid * patch
    if "blocks.0.mlp.w12.weight" in canonical:
        act = "swiglu"
        hidden = canonical["blocks.0.mlp.w12.weight"].shape[0] // 2
    else:
        act = hints.get("act") or "gelu"
        assert act != "swiglu", "a gated MLP in the config, but no mlp.w12 (gate, up) tensors"
        hidden = canonical["blocks.0.mlp.fc1.weight"].shape[0] if depth else 0
    if "mlp_hidden" in hints:
        assert int(hints["mlp_hidden"]) == hidden, "intermediate_size disagrees with the MLP weights"
    return Config(
        dim=dim,
        depth=depth,
        heads=int(hints.get("heads", dim // 64)),
        patch=patch,
        registers=registers,
        grid=grid,
        attention=hints.get("attention") or ("sink" if has_sinks else "softmax"),
        pos_interp=hints.get("pos_interp") or default_pos_interp(layout, registers,
                                                                 hints.get("model_type"), family,
                                                                 "timm_hub" in hints),
        eps=float(hints.get("layer_norm_eps", 1e-5 if clip or dinov3 else 1e-6)),
        mlp=act,
        family=family,
        class_token=class_token,
        pos_embed_class=pos_embed_class,
        pre_norm="norm_pre.weight" in canonical,
        final_norm="norm.weight" in canonical,
        fc_norm="fc_norm.weight" in canonical,
        proj_dim=proj_dim,
        mean=tuple(float(v) for v in hints.get(
            "mean", CLIP_MEAN if clip or eva else SIGLIP_MEAN if siglip else IMAGENET_MEAN)),
        std=tuple(float(v) for v in hints.get(
            "std", CLIP_STD if clip or eva else SIGLIP_STD if siglip else IMAGENET_STD)),
        input_size=int(hints.get("input_size", native if clip or siglip else 224)),
        crop_pct=float(hints.get("crop_pct", 1.0 if clip or siglip or dinov3 else
                                 0.9 if eva else 0.875)),
        pool="map" if "attn_pool.latent" in canonical else "avg",
        eval_squash=_flag(hints.get("eval_squash", siglip or dinov3)),
        positions=positions,
        rope_theta=float(hints.get("rope_theta", EVA_ROPE_THETA if positions == "rope_eva" else 0.0)),
        rope_ref_grid=tuple(int(v) for v in hints.get(
            "rope_ref_grid", EVA_REF_GRID if positions == "rope_eva" else (0, 0))),
        mlp_norm="blocks.0.mlp.norm.weight" in canonical,
        attn_norm="blocks.0.attn.norm.weight" in canonical,
    )


def _flag(value):
    """A boolean hint: a bool, or a metadata string (true / 1 / false / 0)."""
    if isinstance(value, str):
        assert value.lower() in ("true", "1", "false", "0"), value
        return value.lower() in ("true", "1")
    return bool(value)


def hints_from_hf_config(cfg):
    hints = {"heads": cfg["num_attention_heads"], "patch_size": cfg["patch_size"],
             "dim": cfg["hidden_size"], "depth": cfg["num_hidden_layers"],
             "grid": cfg["image_size"] // cfg["patch_size"],
             "layer_norm_eps": cfg.get("layer_norm_eps", 1e-6), "model_type": cfg["model_type"]}
    if cfg["model_type"] == "dinov2_with_registers":
        hints["num_registers"] = cfg.get("num_register_tokens", 0)
    return hints


def hints_from_hf_clip_config(cfg, preprocessor=None):
    """HF CLIPModel's config.json (its vision_config) or CLIPVisionModel's own, with the
    defaults of transformers' CLIPVisionConfig for absent keys (hidden_size 768, 12 heads and
    layers, patch 32, image 224, quick_gelu, eps 1e-5); preprocessor_config.json's image_mean /
    image_std and crop_size / size.shortest_edge (the eval transform)."""
    vision = cfg.get("vision_config", cfg)
    patch = vision.get("patch_size", 32)
    hints = {"family": "clip", "heads": vision.get("num_attention_heads", 12), "patch_size": patch,
             "dim": vision.get("hidden_size", 768), "depth": vision.get("num_hidden_layers", 12),
             "grid": vision.get("image_size", 224) // patch,
             "layer_norm_eps": vision.get("layer_norm_eps", 1e-5),
             "act": vision.get("hidden_act", "quick_gelu")}
    projection = vision.get("projection_dim", cfg.get("projection_dim"))
    if projection is not None:
        hints["proj_dim"] = projection
    if preprocessor:
        hints["mean"], hints["std"] = preprocessor["image_mean"], preprocessor["image_std"]
        crop = preprocessor["crop_size"]
        crop = crop["height"] if isinstance(crop, dict) else crop
        short = preprocessor["size"]
        short = short["shortest_edge"] if isinstance(short, dict) else short
        hints["input_size"], hints["crop_pct"] = crop, crop / short
    return hints


# HF hidden_act names of the activations the reference computes (transformers' ACT2FN):
# gelu_pytorch_tanh (SigLIP's) and gelu_new are the tanh approximation, gelu the exact erf.
SIGLIP_ACTIVATIONS = {"gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh", "gelu": "gelu",
                      "quick_gelu": "quick_gelu"}


def squash_preprocessor_hints(hints, preprocessor, family):
    """The preprocessor_config.json of a processor that squashes to size {height, width} with no
    crop (SigLIP's, DINOv3's): image_mean / image_std, and the size (square only) as input_size.
    A center crop or a non-square size is refused (ValueError)."""
    if not preprocessor:
        return hints
    if preprocessor.get("do_center_crop"):
        raise ValueError(f"preprocessor_config.json: a center crop is not {family}'s eval transform")
    for key, name in (("image_mean", "mean"), ("image_std", "std")):
        if key in preprocessor:
            hints[name] = preprocessor[key]
    size = preprocessor.get("size")
    if size is not None:
        height, width = (size["height"], size["width"]) if isinstance(size, dict) else (size, size)
        if height != width:
            raise ValueError(f"preprocessor_config.json: size {height}x{width} is not square")
        hints["input_size"] = height
    return hints


def hints_from_hf_siglip_config(cfg, preprocessor=None):
    """HF SiglipVisionModel's config.json (model_type siglip_vision_model: the top level) or
    SiglipModel's (siglip: its vision_config), with the defaults of transformers'
    SiglipVisionConfig for absent keys (hidden_size 768, 12 heads and layers, patch 16, image
    224, hidden_act gelu_pytorch_tanh, layer_norm_eps 1e-6); preprocessor_config.json
    (SiglipImageProcessor): image_mean / image_std (default 0.5 each), size {height, width} (the
    squash resize; square only; default the native image_size). An activation the reference does
    not compute, a non-square size or a center crop is refused (ValueError)."""
    vision = cfg.get("vision_config", {}) if cfg.get("model_type") == "siglip" else cfg
    patch = vision.get("patch_size", 16)
    act = vision.get("hidden_act", "gelu_pytorch_tanh")
    if act not in SIGLIP_ACTIVATIONS:
        raise ValueError(f"config.json: hidden_act '{act}' is not one the reference computes")
    hints = {"family": "siglip", "heads": vision.get("num_attention_heads", 12),
             "patch_size": patch, "dim": vision.get("hidden_size", 768),
             "depth": vision.get("num_hidden_layers", 12),
             "grid": vision.get("image_size", 224) // patch,
             "layer_norm_eps": vision.get("layer_norm_eps", 1e-6),
             "act": SIGLIP_ACTIVATIONS[act], "model_type": cfg.get("model_type"),
             "eval_squash": True}
    return squash_preprocessor_hints(hints, preprocessor, "SigLIP")


# DINOv3's hidden_act (transformers' ACT2FN names): the plain MLP's, and the gated MLP's SiLU.
DINOV3_ACTIVATIONS = {"gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
                      "quick_gelu": "quick_gelu"}
DINOV3_GATED_ACTIVATIONS = ("silu", "swish")


def hints_from_hf_dinov3_config(cfg, preprocessor=None):
    """HF DINOv3ViTModel's config.json (model_type dinov3_vit), with the defaults of
    transformers' DINOv3ViTConfig for absent keys (hidden_size 384, 6 heads, 12 layers,
    intermediate_size 1536, patch 16, image 224, hidden_act gelu, layer_norm_eps 1e-5,
    rope_theta 100, num_register_tokens 0, use_gated_mlp false); the positions are rope_dinov3
    with θ = rope_theta, the grid image_size // patch_size (recorded, never resampled), the MLP
    gated (swiglu: hidden_act must be silu) when use_gated_mlp, else hidden_act. The biases
    (query_bias, key_bias, value_bias, proj_bias, mlp_bias) are read from the tensors present.
    pos_embed_shift / jitter / rescale act in training only. preprocessor_config.json
    (DINOv3ViTImageProcessorFast: a squash resize to size {height, width}, bilinear with
    antialias, ImageNet mean / std, no crop): image_mean / image_std, size (square only) as
    input_size. An activation the reference does not compute, a non-square size or a center crop
    is refused (ValueError)."""
    gated = bool(cfg.get("use_gated_mlp", False))
    act = cfg.get("hidden_act", "gelu")
    if gated and act not in DINOV3_GATED_ACTIVATIONS:
        raise ValueError(f"config.json: use_gated_mlp with hidden_act '{act}': the reference "
                         "computes the gated MLP with silu only")
    if not gated and act not in DINOV3_ACTIVATIONS:
        raise ValueError(f"config.json: hidden_act '{act}' is not one the reference computes")
    patch = cfg.get("patch_size", 16)
    hints = {"family": "dinov3", "positions": "rope_dinov3",
             "rope_theta": float(cfg.get("rope_theta", 100.0)),
             "heads": cfg.get("num_attention_heads", 6), "patch_size": patch,
             "dim": cfg.get("hidden_size", 384), "depth": cfg.get("num_hidden_layers", 12),
             "mlp_hidden": cfg.get("intermediate_size", 1536),
             "grid": cfg.get("image_size", 224) // patch,
             "num_registers": cfg.get("num_register_tokens", 0),
             "layer_norm_eps": cfg.get("layer_norm_eps", 1e-5),
             "act": "swiglu" if gated else DINOV3_ACTIVATIONS[act],
             "model_type": cfg.get("model_type"), "eval_squash": True}
    return squash_preprocessor_hints(hints, preprocessor, "DINOv3")


def hints_from_open_clip_config(cfg):
    """open_clip_config.json: model_cfg.vision_cfg (width, layers, patch_size, image_size,
    head_width 64 by default: heads = width / head_width), model_cfg.quick_gelu (False by
    default), model_cfg.embed_dim, preprocess_cfg.mean / std."""
    model, vision = cfg["model_cfg"], cfg["model_cfg"]["vision_cfg"]
    hints = {"family": "clip", "heads": vision["width"] // vision.get("head_width", 64),
             "patch_size": vision["patch_size"], "dim": vision["width"], "depth": vision["layers"],
             "grid": vision["image_size"] // vision["patch_size"],
             "act": "quick_gelu" if model.get("quick_gelu", False) else "gelu",
             "proj_dim": model["embed_dim"]}
    preprocess = cfg.get("preprocess_cfg", {})
    for key in ("mean", "std"):
        if key in preprocess:
            hints[key] = preprocess[key]
    return hints


# timm's act_layer names (model_args.act_layer) of the activations the reference computes; timm
# builds nn.GELU (the exact erf GELU) when none is named, its SigLIP towers included.
TIMM_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "quick_gelu": "quick_gelu"}


def hints_from_timm_config(cfg):
    """An HF-hub timm repo's config.json: `architecture` names the family (siglip / clip /
    dinov2 in the name, in that order, else timm) and QuickGELU (`quickgelu` in the name);
    model_args.act_layer the activation (gelu, gelu_tanh, quick_gelu; another is refused with
    ValueError; absent: nn.GELU, so gelu unless the name says quickgelu); model_args.num_heads
    where given; pretrained_cfg mean, std, crop_pct, input_size [3, H, W] (H used) and crop_mode
    (timm's eval transform center-crops unless it is "squash": eval_squash, stated whenever
    there is a pretrained_cfg, so a SigLIP tower's family default does not apply).
    timm's SigLIP towers (vit_*_siglip_*, docs/design.md, "Families"): family siglip; they have no class token
    (a class token beside one is refused in `config_from_weights`).
    timm Eva (docs/design.md, "Families"): an `architecture` starting eva02_ (EVA-02, the EVA-02-CLIP towers too)
    is family eva with positions rope_eva, temperature 10000 and the reference grid
    model_args.ref_feat_shape ([h, w] or one int) or 16 x 16 (every eva02_* model's, whatever
    its native grid); eva_ (EVA-01) is family eva with learned positions only. A model_args
    use_rot_pos_emb states the rotation either way; a null ref_feat_shape (positions
    arange(n), no reference grid) is refused (ValueError)."""
    arch = cfg.get("architecture", "")
    model_args = cfg.get("model_args", {})
    if arch.startswith(("eva02_", "eva_")):
        hints = {"family": "eva", "timm_hub": True}
        if model_args.get("use_rot_pos_emb", arch.startswith("eva02_")):
            ref_shape = model_args.get("ref_feat_shape", EVA_REF_GRID)
            if ref_shape is None:
                raise ValueError("config.json: ref_feat_shape null (no reference grid) is not one "
                                 "the reference computes")
            if isinstance(ref_shape, int):
                ref_shape = (ref_shape, ref_shape)
            hints.update(positions="rope_eva", rope_theta=EVA_ROPE_THETA,
                         rope_ref_grid=tuple(int(v) for v in ref_shape))
        else:
            hints["positions"] = "learned"
    else:
        family = ("siglip" if "siglip" in arch else "clip" if "clip" in arch
                  else "dinov2" if "dinov2" in arch else "timm")
        hints = {"family": family, "timm_hub": True}  # timm resamples positions with antialias
    act = model_args.get("act_layer")
    if act is not None:
        if act not in TIMM_ACTIVATIONS:
            raise ValueError(f"config.json: model_args.act_layer '{act}' is not one the reference computes")
        hints["act"] = TIMM_ACTIVATIONS[act]
    if "quickgelu" in arch:
        hints["act"] = "quick_gelu"
    if "num_heads" in model_args:
        hints["heads"] = model_args["num_heads"]
    if "pretrained_cfg" in cfg:
        pretrained = cfg["pretrained_cfg"]
        for key in ("mean", "std", "crop_pct"):
            if key in pretrained:
                hints[key] = pretrained[key]
        if "input_size" in pretrained:
            hints["input_size"] = pretrained["input_size"][1]
        hints["eval_squash"] = pretrained.get("crop_mode", "center") == "squash"
    return hints


def head_is_projection(stored, family):
    """timm's `head` is a CLIP tower's projection when the family is clip and it has no bias or
    a zero one; otherwise it is a classifier, which the forward never reads. An EVA model's
    (family eva) is the EVA-CLIP projection when, besides, the model pools its class token
    (global_pool 'token': a final `norm`, no `fc_norm`)."""
    if family not in ("clip", "eva") or "head.weight" not in stored:
        return False
    if family == "eva" and ("norm.weight" not in stored or "fc_norm.weight" in stored):
        return False
    return "head.bias" not in stored or bool((stored["head.bias"] == 0).all())


def _read_json(path):
    with open(path) as f:
        return json.load(f)


def load_model(path, attention_override="", pos_interp_override=""):
    """Load a checkpoint in any layout: a .safetensors file (dinov2, timm_reg, timm, open_clip;
    vitreg metadata optional) or a directory holding model.safetensors and its configs (HF
    config.json; HF CLIP's, SigLIP's and DINOv3's also preprocessor_config.json; OpenCLIP's
    open_clip_config.json; an HF-hub timm repo's config.json with `architecture` /
    `pretrained_cfg`, timm Eva's included: `hints_from_timm_config`).
    Returns (Config, canonical float64 weights)."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    stored, metadata = read_safetensors(os.path.join(path, "model.safetensors")
                                        if os.path.isdir(path) else path)
    config_json = os.path.join(folder, "config.json")
    model_type = (_read_json(config_json).get("model_type")
                  if os.path.isdir(path) and os.path.exists(config_json) else None)
    layout = detect_layout(stored, model_type)
    hints = {}
    if layout is HFLayout:
        hints = hints_from_hf_config(_read_json(config_json))
    elif layout is HFDinov3Layout:
        preprocessor = os.path.join(folder, "preprocessor_config.json")
        hints = hints_from_hf_dinov3_config(_read_json(config_json) if os.path.exists(config_json) else {},
                                            _read_json(preprocessor) if os.path.exists(preprocessor) else None)
    elif layout is HFSiglipLayout:
        preprocessor = os.path.join(folder, "preprocessor_config.json")
        hints = hints_from_hf_siglip_config(_read_json(config_json) if os.path.exists(config_json) else {},
                                            _read_json(preprocessor) if os.path.exists(preprocessor) else None)
    elif layout is HFClipLayout:
        preprocessor = os.path.join(folder, "preprocessor_config.json")
        hints = hints_from_hf_clip_config(_read_json(config_json),
                                          _read_json(preprocessor) if os.path.exists(preprocessor) else None)
    elif layout is OpenClipLayout:
        open_clip = os.path.join(folder, "open_clip_config.json")
        hints = (hints_from_open_clip_config(_read_json(open_clip)) if os.path.exists(open_clip)
                 else {"act": "quick_gelu"})  # OpenAI's own weights come without one
    elif os.path.isdir(path) and os.path.exists(config_json):
        timm = _read_json(config_json)
        if "architecture" in timm or "pretrained_cfg" in timm:
            hints = hints_from_timm_config(timm)
    hints.update({k: v for k, v in (metadata or {}).items()
                  if k not in ("image_mean", "image_std")})
    for key, name in (("image_mean", "mean"), ("image_std", "std")):
        if metadata and key in metadata:
            hints[name] = [float(v) for v in metadata[key].split(",")]
    if layout is Dinov2Layout:
        family = hints.get("family") or infer_family(stored, layout)
        canonical = TimmLayout.to_canonical(stored, head_is_projection(stored, family))
    elif layout is TimmEvaLayout:
        hints.setdefault("family", "eva")
        canonical = TimmEvaLayout.to_canonical(stored, head_is_projection(stored, hints["family"]))
    else:
        canonical = layout.to_canonical(stored)
    cfg = config_from_weights(canonical, layout, hints)
    if attention_override:
        cfg = replace(cfg, attention=attention_override)
    if pos_interp_override:
        cfg = replace(cfg, pos_interp=pos_interp_override)
    return cfg, canonical


# ---------------------------------------------------------------------------------------------
# 4. Forward
# ---------------------------------------------------------------------------------------------

def resample_pos_embed(patch_pos, grid, h0, w0, mode, compute_dtype=torch.float32):
    """Position embeddings of the patches, [M*M, D] -> [h0*w0, D] (docs/design.md, "Reference semantics"), computed in
    float32 like the original code; skipped only when (h0, w0) == (M, M)."""
    if (h0, w0) == (grid, grid):
        return patch_pos
    dim = patch_pos.shape[-1]
    x = patch_pos.to(compute_dtype).reshape(1, grid, grid, dim).permute(0, 3, 1, 2)
    if mode == "offset":
        y = F.interpolate(x, scale_factor=((h0 + 0.1) / grid, (w0 + 0.1) / grid), mode="bicubic",
                          align_corners=False, antialias=False)
    elif mode == "antialias":
        y = F.interpolate(x, size=(h0, w0), mode="bicubic", align_corners=False, antialias=True)
    elif mode == "size":
        y = F.interpolate(x, size=(h0, w0), mode="bicubic", align_corners=False, antialias=False)
    else:
        raise ValueError(f"unknown pos_interp mode '{mode}'")
    assert tuple(y.shape[-2:]) == (h0, w0), f"{mode}: got {tuple(y.shape[-2:])}, want {(h0, w0)}"
    return y.permute(0, 2, 3, 1).reshape(h0 * w0, dim).to(patch_pos.dtype)


def attention_with_abstention(logits, kind, sinks=None):
    """(probabilities over the last axis, abstention mass 1 - sum p per row) (docs/design.md, "Attention normalizers").

    softmax:  p = e^z / sum e^z                  abstention 0
    softmax1: p = e^z / (1 + sum e^z)            (a sink logit s = 0)
    sink:     p = e^z / (e^s + sum e^z)          (s = per-head logit, broadcast against logits;
                                                  s = 0 when the checkpoint has no sinks)
    Stable form: m = max(s, max z); p = e^(z-m) / (e^(s-m) + sum e^(z-m)); the abstention is
    computed directly as e^(s-m) / (e^(s-m) + sum e^(z-m)), not as 1 - sum p."""
    if kind == "softmax":
        m = logits.amax(dim=-1, keepdim=True)
        e = torch.exp(logits - m)
        return e / e.sum(dim=-1, keepdim=True), torch.zeros(logits.shape[:-1], dtype=logits.dtype)
    if kind == "softmax1" or sinks is None:
        assert kind in ("softmax1", "sink"), kind
        s = torch.zeros((), dtype=logits.dtype)
    else:
        s = sinks
    s = torch.as_tensor(s, dtype=logits.dtype).expand(logits.shape[:-1]).unsqueeze(-1)
    m = torch.maximum(s, logits.amax(dim=-1, keepdim=True))
    e = torch.exp(logits - m)
    null = torch.exp(s - m)
    denominator = null + e.sum(dim=-1, keepdim=True)
    return e / denominator, (null / denominator).squeeze(-1)


def normalized_attention(logits, kind, sinks=None):
    """Attention probabilities only (see `attention_with_abstention`)."""
    return attention_with_abstention(logits, kind, sinks)[0]


# ---- Reduced precision (docs/design.md, "Reduced precision"), simulated exactly: the same
# roundings on the same fp32 values vitreg rounds; the products and sums in float64 (vitreg sums in
# fp32).

@dataclass
class Numerics:
    """How linears and attention matmuls compute: precision fp32 | bf16 | int8 | int4; act_quant
    per-token | per-tensor (with `ranges` {linear name: (min, max)}). With `observe` set, every
    linear's input range is recorded into it (what `vitreg calibrate-int8` measures)."""
    precision: str = "fp32"
    act_quant: str = "per-token"
    ranges: dict = None
    observe: dict = None
    weight_bits: int = 8  # int8 weights in ±(2^(bits-1) - 1): 8, or 7 (ONNX Runtime's reduce_range)


_numerics = Numerics()


def bf16(t):
    """Round to bf16 (nearest even) via float32, as vitreg rounds its fp32 values."""
    return t.to(torch.float32).to(torch.bfloat16).to(torch.float64)


def affine_u8(lo, hi):
    """ONNX Runtime's DynamicQuantizeLinear rule in float32: the range widened to hold 0,
    scale (hi - lo) / 255 (1 when the range is empty), zero point round(-lo / scale) in [0, 255]."""
    lo = torch.clamp(lo.to(torch.float32), max=0.0)
    hi = torch.clamp(hi.to(torch.float32), min=0.0)
    scale = (hi - lo) / 255.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.clamp(torch.round(-lo / scale), 0, 255)
    return scale, zero


def quantized_input(x, name):
    """A linear's input as uint8 per token (or per tensor): (q, scale, zero point), float64."""
    x32 = x.to(torch.float32)
    if _numerics.act_quant == "per-tensor":
        lo, hi = _numerics.ranges[name]
        sa, za = affine_u8(torch.tensor(lo), torch.tensor(hi))
        sa, za = sa.expand(x32.shape[:-1]), za.expand(x32.shape[:-1])
    else:
        sa, za = affine_u8(x32.amin(dim=-1), x32.amax(dim=-1))
    qa = torch.clamp(torch.round(x32 / sa[..., None]) + za[..., None], 0, 255).to(torch.float64)
    return qa, sa[..., None].to(torch.float64), za[..., None].to(torch.float64)


def int8_linear(x, weight, bias, name):
    """W8A8: weights symmetric per output channel (max|w| / qmax, qmax 127, or 63 for 7-bit
    weights), activations uint8 per token or per tensor; the integer product exact;
    y = (acc - zp * sum_k q_w) * s_a * s_w + b."""
    qmax = float(2 ** (_numerics.weight_bits - 1) - 1)
    w32 = weight.to(torch.float32)
    sw = w32.abs().amax(dim=1) / qmax
    sw = torch.where(sw > 0, sw, torch.ones_like(sw))
    qw = torch.clamp(torch.round(w32 / sw[:, None]), -qmax, qmax).to(torch.float64)
    qa, sa, za = quantized_input(x, name)
    acc = qa @ qw.T
    y = (acc - za * qw.sum(dim=1)) * (sa * sw.to(torch.float64))
    return y if bias is None else y + bias


INT4_GROUP = 128


def int4_weights(weight):
    """int4 weights, written from torchao's Int4WeightOnlyConfig (affine uint4, a float zero, one
    group per 128 inputs; the last group the remainder): over a group's range [lo, hi] in
    float32, scale = bf16(max((hi - lo) / 15, 1e-6)), zero = bf16(lo + 8 scale),
    q = clamp(round((w - (zero - 8 scale)) / scale), 0, 15), and the weight (q - 8) scale + zero,
    exact in float64 [out, in]."""
    w32 = weight.to(torch.float32).reshape(weight.shape[0], -1)
    out = torch.empty(w32.shape, dtype=torch.float64)
    for k0 in range(0, w32.shape[1], INT4_GROUP):
        g = w32[:, k0:k0 + INT4_GROUP]
        lo, hi = g.amin(dim=1), g.amax(dim=1)
        scale = torch.clamp((hi - lo) / 15.0, min=1e-6).to(torch.bfloat16).to(torch.float32)
        zero = (lo + scale * 8.0).to(torch.bfloat16).to(torch.float32)
        q = torch.clamp(torch.round((g - (zero - scale * 8.0)[:, None]) / scale[:, None]), 0, 15)
        out[:, k0:k0 + INT4_GROUP] = (q.to(torch.float64) - 8) * scale.to(torch.float64)[:, None] + zero.to(torch.float64)[:, None]
    return out


def int4_linear(x, weight, bias, name):
    """W4A8: int4_weights, activations uint8 as int8's; y = ((q_a - zp) s_a) @ w^T + b, exact."""
    qa, sa, za = quantized_input(x, name)
    y = ((qa - za) @ int4_weights(weight).T) * sa
    return y if bias is None else y + bias


def linear(x, w, name):
    """x @ weight^T + bias; a linear without a stored bias (qkv_bias=False) has none."""
    weight, bias = w[name + ".weight"], w.get(name + ".bias")
    if _numerics.observe is not None:
        x32 = x.to(torch.float32)
        lo, hi = x32.min().item(), x32.max().item()
        if name in _numerics.observe:
            lo, hi = min(lo, _numerics.observe[name][0]), max(hi, _numerics.observe[name][1])
        _numerics.observe[name] = (lo, hi)
    if _numerics.precision == "bf16":
        return F.linear(bf16(x), bf16(weight), bias)
    if _numerics.precision == "int8":
        return int8_linear(x, weight, bias, name)
    if _numerics.precision == "int4":
        return int4_linear(x, weight, bias, name)
    return F.linear(x, weight, bias)


def layer_norm(x, w, name, eps):
    return F.layer_norm(x, x.shape[-1:], w[name + ".weight"], w[name + ".bias"], eps)


def rope_dinov3_tables(gh, gw, head_dim, theta):
    """DINOv3's 2D axial RoPE for a gh x gw patch grid -> (cos, sin), float64 [gh*gw, head_dim],
    rows the patches in row-major order (docs/design.md, "Families"; HF DINOv3ViTRopePositionEmbedding at
    inference, computed in float64 where HF uses float32). Patch (r, c) has its centre at
    y = ((r + 0.5) / gh) * 2 - 1, x = ((c + 0.5) / gw) * 2 - 1 (each axis by its own count);
    inv_freq_j = 1 / theta^(4j / head_dim), j = 0 .. head_dim/4 - 1 (HF's
    1 / theta ** arange(0, 1, 4 / head_dim)); angles = [2 pi y inv_freq, 2 pi x inv_freq]
    (head_dim / 2), tiled twice (head_dim)."""
    assert head_dim % 4 == 0, head_dim
    inv_freq = 1.0 / theta ** (torch.arange(head_dim // 4, dtype=torch.float64) * 4 / head_dim)
    y = (torch.arange(gh, dtype=torch.float64) + 0.5) / gh * 2 - 1
    x = (torch.arange(gw, dtype=torch.float64) + 0.5) / gw * 2 - 1
    ys, xs = y[:, None].expand(gh, gw).flatten(), x[None, :].expand(gh, gw).flatten()
    angles = 2 * math.pi * torch.cat([ys[:, None] * inv_freq, xs[:, None] * inv_freq], dim=-1)
    angles = torch.cat([angles, angles], dim=-1)                               # [gh*gw, head_dim]
    return torch.cos(angles), torch.sin(angles)


def rope_eva_tables(gh, gw, head_dim, theta, ref_grid):
    """EVA-02's 2D RoPE for a gh x gw patch grid -> (cos, sin), float64 [gh*gw, head_dim], rows
    the patches in row-major order (docs/design.md, "Families"; timm RotaryEmbeddingCat(head_dim,
    in_pixels=False, ref_feat_shape=ref_grid), temperature theta). As timm computes them, in
    float32: bands_j = 1 / theta^(j / (head_dim/4)), j = 0 .. head_dim/4 - 1; per axis
    t = arange(n) / n * R (y: n = gh, R = ref_grid[0]; x: n = gw, R = ref_grid[1]; so t spans
    [0, R) over any count); angle[y, x] = [t_y[y] * bands, t_x[x] * bands] (head_dim/2: the y
    bands, then the x bands), each angle repeated twice in place (repeat_interleave:
    a0 a0 a1 a1 ..., head_dim), for the interleaved pairs of `rotate_pairs`. cos / sin are then
    taken in float64 of those float32 angles."""
    assert head_dim % 4 == 0, head_dim
    quarter = head_dim // 4
    bands = 1.0 / (theta ** (torch.arange(quarter, dtype=torch.int64).to(torch.float32) / quarter))
    ty = torch.arange(gh, dtype=torch.int64).to(torch.float32) / gh * ref_grid[0]
    tx = torch.arange(gw, dtype=torch.int64).to(torch.float32) / gw * ref_grid[1]
    grid = torch.stack(torch.meshgrid(ty, tx, indexing="ij"), dim=-1)            # [gh, gw, 2]
    angles = (grid[..., None] * bands).reshape(gh * gw, 2 * quarter)             # float32
    angles = angles.repeat_interleave(2, dim=-1).to(torch.float64)               # [gh*gw, hd]
    return torch.cos(angles), torch.sin(angles)


def rotate_half(t):
    """[a, b] (the two halves of the last axis) -> [-b, a]."""
    a, b = t.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def rotate_pairs(t):
    """Interleaved pairs (timm's `rot`): out[2i] = -t[2i+1], out[2i+1] = t[2i]."""
    return torch.stack([-t[..., 1::2], t[..., ::2]], dim=-1).reshape(t.shape)


ROTATIONS = {"half": rotate_half, "pairs": rotate_pairs}


def apply_rope(t, rope):
    """t [B,h,N,hd] with its last cos.shape[0] tokens (the patches) rotated,
    t' = t cos + rotate(t) sin; the tokens before them (CLS, registers, test-time registers)
    unchanged. rope: (cos, sin) (DINOv3: rotate_half) or (cos, sin, kind) with kind "half" |
    "pairs" (EVA-02: `rotate_pairs`); None: t."""
    if rope is None:
        return t
    cos, sin = rope[:2]
    rotate = ROTATIONS[rope[2] if len(rope) > 2 else "half"]
    n = cos.shape[0]
    assert n <= t.shape[-2], (n, tuple(t.shape))
    patches = t[..., t.shape[-2] - n:, :]
    return torch.cat([t[..., :t.shape[-2] - n, :], patches * cos + rotate(patches) * sin], dim=-2)


_rope_off = False


class rotation_disabled:
    """Within `with rotation_disabled():` every rope_dinov3 / rope_eva angle is 0 (cos 1, sin 0:
    the rotation is the identity). For the checks that the rotation matters."""

    def __enter__(self):
        global _rope_off
        self.saved, _rope_off = _rope_off, True

    def __exit__(self, *exc):
        global _rope_off
        _rope_off = self.saved


def rope_for(cfg, gh, gw):
    """The rotation of cfg's rotary positions on a gh x gw grid (`apply_rope`'s rope): rope_dinov3
    (cos, sin); rope_eva (cos, sin, "pairs"); None with learned positions only."""
    if cfg.positions == "rope_dinov3":
        cos, sin = rope_dinov3_tables(gh, gw, cfg.dim // cfg.heads, cfg.rope_theta)
        kind = ()
    elif cfg.positions == "rope_eva":
        cos, sin = rope_eva_tables(gh, gw, cfg.dim // cfg.heads, cfg.rope_theta, cfg.rope_ref_grid)
        kind = ("pairs",)
    else:
        return None
    if _rope_off:
        cos, sin = torch.ones_like(cos), torch.zeros_like(sin)
    return (cos, sin) + kind


def attention(x, w, prefix, cfg, evict=None, rope=None):
    """Multi-head self-attention on x [B,N,D]; fused qkv rows [0:D] q, [D:2D] k, [2D:3D] v.
    `evict` (bool [B,h,N] or None): keys whose logits become -inf for every query before the
    normalizer (docs/design.md, "Interventions and the study"): softmax renormalizes over the remaining keys, softmax-1 / sink keep
    their null term. `rope` ((cos, sin[, kind]) [P,hd] or None): DINOv3's / EVA-02's rotation of
    the last P tokens' q and k in every head, after the projections (and their bias), before q.k
    (`apply_rope`). With cfg.attn_norm the merged heads' output goes through the LayerNorm
    `prefix.norm` before `prefix.proj` (EVA-CLIP's inner attention norm). Returns (output
    [B,N,D], probabilities [B,h,N,N], abstention [B,h,N], logits [B,h,N,N]: the scaled q.k of the
    rotated q and k, before the eviction mask)."""
    B, N, D = x.shape
    hd = D // cfg.heads
    q, k, v = linear(x, w, prefix + ".qkv").split(D, dim=-1)
    q, k, v = (t.reshape(B, N, cfg.heads, hd).transpose(1, 2) for t in (q, k, v))  # [B,h,N,hd]
    q, k = apply_rope(q, rope), apply_rope(k, rope)
    if _numerics.precision == "fp32":
        logits = (q @ k.transpose(-2, -1)) * hd ** -0.5                              # [B,h,N,N]
    else:  # bf16 matmuls; vitreg folds the scale into the keys before rounding them
        logits = bf16(q) @ bf16(k * hd ** -0.5).transpose(-2, -1)
    sinks = w.get(prefix + ".sinks")
    if sinks is not None:
        sinks = sinks.reshape(1, cfg.heads, 1)
    masked = logits
    if evict is not None:
        assert evict.shape == (B, cfg.heads, N), (tuple(evict.shape), (B, cfg.heads, N))
        assert cfg.attention != "softmax" or not evict.all(dim=-1).any(), \
            "softmax with every key evicted has no distribution"
        masked = logits.masked_fill(evict[:, :, None, :], -math.inf)
    p, abstention = attention_with_abstention(masked, cfg.attention, sinks)
    pv = p @ v if _numerics.precision == "fp32" else bf16(p) @ bf16(v)
    out = pv.transpose(1, 2).reshape(B, N, D)
    if cfg.attn_norm:
        out = layer_norm(out, w, prefix + ".norm", cfg.eps)
    return linear(out, w, prefix + ".proj"), p, abstention, logits


def mlp(x, w, prefix, cfg, edit=None):
    """Returns (output [B,N,D], hidden activation [B,N,H]: after the activation (GELU, QuickGELU,
    tanh GELU), or silu(x1) * x2).
    `edit` (callable or None) replaces the hidden activation before the second linear; the
    returned hidden is the edited one. With cfg.mlp_norm the (edited) hidden activation goes
    through the LayerNorm `prefix.norm` [H] before the second linear (EVA-02's sub-LN, timm
    scale_mlp); the returned hidden is the activation before that norm."""
    if cfg.mlp == "swiglu":
        x1, x2 = linear(x, w, prefix + ".w12").chunk(2, dim=-1)
        hidden = F.silu(x1) * x2
    elif cfg.mlp == "quick_gelu":  # OpenAI CLIP's QuickGELU: x * sigmoid(1.702 x)
        z = linear(x, w, prefix + ".fc1")
        hidden = z * torch.sigmoid(1.702 * z)
    elif cfg.mlp == "gelu_tanh":  # SigLIP's gelu_pytorch_tanh
        hidden = F.gelu(linear(x, w, prefix + ".fc1"), approximate="tanh")
    else:
        hidden = F.gelu(linear(x, w, prefix + ".fc1"))  # exact erf GELU
    if edit is not None:
        hidden = edit(hidden)
    second = ".w3" if cfg.mlp == "swiglu" else ".fc2"
    if cfg.mlp_norm:
        return linear(layer_norm(hidden, w, prefix + ".norm", cfg.eps), w, prefix + second), hidden
    return linear(hidden, w, prefix + second), hidden


def attention_pool(x, w, cfg, prefix="attn_pool"):
    """The attention-pool (MAP) head on the final-normed tokens x [B,N,D] -> [B,D]: HF SigLIP's
    SiglipMultiheadAttentionPoolingHead, timm's AttentionPoolLatent. Queries from the learned
    latent [1,Q,D] (`q`), keys and values from every token (`kv`: rows [0:D] k, [D:2D] v),
    cfg.heads heads, logits scaled by head_dim^-0.5, a plain softmax (the blocks' attention kind
    does not apply here); o = proj(attention output); h = o + mlp(norm(o)) (cfg.mlp, cfg.eps);
    the result is h[:, 0], the first latent's row."""
    B, N, D = x.shape
    hd = D // cfg.heads
    latent = w[prefix + ".latent"].reshape(1, -1, D).expand(B, -1, -1)         # [B,Q,D]
    Q = latent.shape[1]
    q = linear(latent, w, prefix + ".q").reshape(B, Q, cfg.heads, hd).transpose(1, 2)
    k, v = linear(x, w, prefix + ".kv").split(D, dim=-1)
    k, v = (t.reshape(B, N, cfg.heads, hd).transpose(1, 2) for t in (k, v))     # [B,h,N,hd]
    if _numerics.precision == "fp32":
        logits = (q @ k.transpose(-2, -1)) * hd ** -0.5                          # [B,h,Q,N]
    else:
        logits = bf16(q) @ bf16(k * hd ** -0.5).transpose(-2, -1)
    p = attention_with_abstention(logits, "softmax")[0]
    pv = p @ v if _numerics.precision == "fp32" else bf16(p) @ bf16(v)
    o = linear(pv.transpose(1, 2).reshape(B, Q, D), w, prefix + ".proj")
    h = o + mlp(layer_norm(o, w, prefix + ".norm", cfg.eps), w, prefix + ".mlp", cfg)[0]
    return h[:, 0]


def embed(images, w, cfg, ttr=0):
    """Tokens [B, P+R+K+h0*w0, D]: [CLS, registers, K test-time registers, patches] (P = 1; no
    CLS and P = 0 without a class token); the position embedding is added to CLS (unless
    no_embed_class) and patches before the registers are inserted (registers get none; with
    rope_dinov3 positions nothing is added: the rotation sits in the attention; rope_eva adds
    the learned table, resampled as timm's, and rotates too); then
    norm_pre (cfg.pre_norm) over every token; the K = `ttr` test-time registers are zero vectors
    as the blocks receive them (docs/design.md, "Interventions and the study": after norm_pre)."""
    B, _, H, W = images.shape
    p = cfg.patch
    assert H % p == 0 and W % p == 0, f"image {H}x{W} is not a multiple of patch {p}"
    h0, w0 = H // p, W // p
    if _numerics.precision == "fp32" and _numerics.observe is None:
        patches = F.conv2d(images, w["patch_embed.proj.weight"], w.get("patch_embed.proj.bias"),
                           stride=p)
        patches = patches.flatten(2).transpose(1, 2)                               # [B,h0*w0,D]
    else:  # the conv as the linear it is, on patches flattened (channel, ky, kx)
        conv = {"patch_embed.proj.weight": w["patch_embed.proj.weight"].flatten(1)}
        if "patch_embed.proj.bias" in w:
            conv["patch_embed.proj.bias"] = w["patch_embed.proj.bias"]
        patches = linear(F.unfold(images, p, stride=p).transpose(1, 2), conv, "patch_embed.proj")
    # rope_dinov3: no absolute positions at all; rope_eva: the learned table and the rotation
    learned = cfg.positions == "learned" or (cfg.positions == "rope_eva" and "pos_embed" in w)
    if learned:
        pos = w["pos_embed"][0]
        first = 1 if cfg.pos_embed_class else 0   # the class token's row, if pos_embed has one
        patches = patches + resample_pos_embed(pos[first:], cfg.grid, h0, w0, cfg.pos_interp)
    tokens = []
    if cfg.class_token:
        cls = w["cls_token"].reshape(1, 1, -1)
        tokens.append((cls + pos[0] if learned and cfg.pos_embed_class else cls).expand(B, 1, -1))
    if cfg.registers:
        tokens.append(w["register_tokens"].expand(B, -1, -1))
    if ttr:
        tokens.append(torch.zeros(B, ttr, patches.shape[-1], dtype=patches.dtype))
    tokens.append(patches)
    x = torch.cat(tokens, dim=1)
    if cfg.pre_norm:
        x = layer_norm(x, w, "norm_pre", cfg.eps)
        if ttr:
            begin = prefix_tokens(cfg) + cfg.registers
            x = torch.cat([x[:, :begin], torch.zeros_like(x[:, begin:begin + ttr]),
                           x[:, begin + ttr:]], dim=1)
    return x


def prefix_tokens(cfg):
    """Tokens before the registers: the class token, when the model has one."""
    return 1 if cfg.class_token else 0


def final_norm(x, w, cfg):
    """The final norm over every token: `norm` (identity when cfg.final_norm is False)."""
    return layer_norm(x, w, "norm", cfg.eps) if cfg.final_norm else x


TRACE_KEYS = ("attn", "abstention", "norms", "inf_norm", "kurtosis", "mlp_hidden", "key_mass",
              "blocks", "blocks_normed", "logits")


def block_output_statistics(x):
    """The statistics of docs/design.md, "Artifact metrics" of one block's output x [B,N,D] (the residual stream, before the
    final norm), per image: L2 token norms over channels [B,N], max |x| over all tokens and
    channels [B], Pearson kurtosis mu4 / sigma^4 (NOT excess: a Gaussian gives 3) over all N*D
    values with population moments [B]."""
    values = x.flatten(1)
    centered = values - values.mean(dim=1, keepdim=True)
    kurtosis = (centered ** 4).mean(dim=1) / (centered ** 2).mean(dim=1) ** 2
    return {"norms": x.norm(dim=-1), "inf_norm": values.abs().amax(dim=1), "kurtosis": kurtosis}


@dataclass
class Intervention:
    """Inference-time interventions of one forward (docs/design.md, "Interventions and the study"); the default changes nothing.

    evict    bool [B, L, h, N] or None: key k is evicted for every query of image b, layer l,
             head h (its logit is -inf before the normalizer); N counts tokens in the edited
             layout, test-time registers included. Evicted tokens still compute their own rows.
    ttr      K, the number of test-time registers: zero tokens without position embedding,
             inserted after the trained registers: [CLS, R registers, K test-time, patches].
    neurons  ((layer, neuron), ...): register neurons. In each listed layer, right after the MLP
             activation (after GELU; SwiGLU: silu(x1) * x2), per image: m = max over all N
             tokens of hidden[:, n] (signed, before editing), hidden[test-time rows, n] = m,
             hidden[patch rows, n] = 0; CLS and trained registers unchanged (so with K = 0
             the patches are still zeroed).
    inpaint  (layer, ...): after each listed block, every image's patch tokens go through
             `inpaint_artifacts` (the repair @inpaint=artifacts).
    inpaint_directions  [L, D] or None: the defect directions; inpaint then flags by direction
             (the repair @inpaint=directions:FILE), row l after block l."""
    evict: torch.Tensor = None
    ttr: int = 0
    neurons: tuple = ()
    inpaint: tuple = ()
    inpaint_directions: torch.Tensor = None


def inpaint_artifacts(patches, grid_h, grid_w, mad_k=10.0, direction=None):
    """The repair @inpaint=artifacts on one image's patch tokens [grid_h*grid_w, D] (row-major
    grid): the tokens the robust rule flags (L2 norm > median + mad_k * MAD over these tokens, as
    `artifact_tokens`) become the mean of the unflagged tokens within Chebyshev distance r of
    them, r = 1 (the 3x3 neighbours), widened by one while there are none. The means are of the
    tokens before any replacement. With `direction` [D] (@inpaint=directions) the flagged tokens
    are those whose |cos| with it is above median + mad_k * MAD instead. Returns a new tensor."""
    patches = torch.as_tensor(patches, dtype=torch.float64)
    if direction is None:
        flagged = set(artifact_tokens(patches[None], 0, mad_k, 0)[0])
    else:
        u = torch.as_tensor(direction, dtype=torch.float64)
        cos = (patches @ u).abs() / (patches.norm(dim=1) * u.norm())
        mid = median(cos)
        flagged = set(torch.nonzero(cos > mid + mad_k * median((cos - mid).abs())).flatten().tolist())
    if len(flagged) == patches.shape[0]:
        return patches.clone()
    out = patches.clone()
    for cell in flagged:
        row, col = divmod(cell, grid_w)
        r, chosen = 0, []
        while not chosen:
            r += 1
            chosen = [y * grid_w + x
                      for y in range(max(0, row - r), min(grid_h, row + r + 1))
                      for x in range(max(0, col - r), min(grid_w, col + r + 1))
                      if y * grid_w + x not in flagged]
        out[cell] = patches[chosen].mean(dim=0)
    return out


def register_neuron_edit(neurons, ttr_begin, ttr):
    """The `mlp` edit of one layer for test-time registers (see `Intervention`): hidden [B,N,H]
    with the test-time registers at rows [ttr_begin, ttr_begin + ttr) and the patches after
    them; `neurons` the hidden units n to edit. None when `neurons` is empty."""
    if not neurons:
        return None
    index = torch.tensor(sorted(set(neurons)), dtype=torch.long)

    def edit(hidden):
        peak = hidden[:, :, index].amax(dim=1)                    # [B, n]: before editing
        hidden = hidden.clone()
        hidden[:, ttr_begin:ttr_begin + ttr, index] = peak[:, None, :].expand(-1, ttr, -1)
        hidden[:, ttr_begin + ttr:, index] = 0
        return hidden
    return edit


def forward(cfg, w, images, trace=False, numerics=None, intervention=None):
    """See `forward_fp`; `numerics` (a Numerics) sets the precision of this forward,
    `intervention` (an Intervention) its docs/design.md, "Interventions and the study" edits (None: the plain forward)."""
    global _numerics
    saved = _numerics
    _numerics = numerics or Numerics()
    try:
        return forward_fp(cfg, w, images, trace, intervention)
    finally:
        _numerics = saved


def forward_fp(cfg, w, images, trace=False, intervention=None):
    """DINOv2 forward_features in float64, with the family flags of cfg (timm, CLIP).
    images [B,3,H,W] -> dict with cls [B,D], registers [B,R+K,D] (trained, then test-time),
    patches [B,h0*w0,D] (row-major grid), pooled [B,D] (the mean of the patches, then fc_norm
    when cfg.fc_norm; with cfg.pool == "map" the attention-pool head's output over every
    final-normed token, see `attention_pool`), embedding [B,E] (cls @ proj; only when
    cfg.proj_dim) and prenorm [B,N,D]. All are the final-normed tokens (`norm`, identity without
    one). Without a class token the tokens are [registers, patches] and `cls` is the pooled
    feature (SigLIP: the MAP head's output). With cfg.positions == "rope_dinov3" (DINOv3) no
    position is added to any token; every block's attention rotates the patch tokens' q and k
    (`rope_dinov3_tables` of the input's grid; CLS, registers and test-time registers unrotated);
    `cls` is HF's pooler_output (the normed CLS), `pooled` still the mean of the patches.
    With "rope_eva" (EVA-02) the learned pos_embed is added as for timm and every block rotates
    the patch tokens' q and k too (`rope_eva_tables`, interleaved pairs; CLS unrotated).

    With trace=True the dict also holds "trace", a dict of float64 tensors with a leading batch
    axis B and then one entry per block (L = depth), tokens N = 1 + R + K + h0*w0 in token order
    (K = intervention.ttr, else 0):
      attn [B,L,h,N,N]      attention probabilities (the normalizer's output: softmax-1 / sink
                            rows sum to 1 - abstention; evicted columns are 0),
      logits [B,L,h,N,N]    the scaled q.k logits, before any eviction mask,
      abstention [B,L,h,N]  per query e^(s-m) / (e^(s-m) + sum e^(z-m)); 0 for softmax,
      norms [B,L,N], inf_norm [B,L], kurtosis [B,L]  of each block's output (see
                            `block_output_statistics`),
      mlp_hidden [B,L,N,H]  the MLP hidden activation (after GELU; SwiGLU: silu(x1) * x2),
                            after the register-neuron edit when there is one,
      key_mass [B,L,h,N]    alpha_k = (1/N) sum_i A_ik, the mean attention key k receives,
      blocks [B,L,N,D]      each block's output, the residual stream before the final norm
                            (dinov2 get_intermediate_layers(norm=False); the last is prenorm),
      blocks_normed [B,L,N,D]  the final LayerNorm (`norm.*`, cfg.eps) of each of them
                            (get_intermediate_layers(norm=True); the last holds cls, registers
                            and patches)."""
    iv = intervention or Intervention()
    R, K, P = cfg.registers, iv.ttr, prefix_tokens(cfg)
    assert K >= 0, K
    images = torch.as_tensor(images, dtype=torch.float64)
    x = embed(images, w, cfg, K)
    rope = rope_for(cfg, images.shape[-2] // cfg.patch, images.shape[-1] // cfg.patch)
    B, N = x.shape[:2]
    if iv.evict is not None:
        assert tuple(iv.evict.shape) == (B, cfg.depth, cfg.heads, N), \
            f"eviction mask {tuple(iv.evict.shape)}, want {(B, cfg.depth, cfg.heads, N)}"
        assert iv.evict.dtype == torch.bool, iv.evict.dtype
    neurons = {}
    for layer, neuron in iv.neurons:
        assert 0 <= layer < cfg.depth, f"register neuron layer {layer} of {cfg.depth}"
        neurons.setdefault(layer, []).append(neuron)
    layers = []
    for i in range(cfg.depth):
        b = f"blocks.{i}"
        ls1 = w.get(b + ".ls1.gamma", 1.0)
        ls2 = w.get(b + ".ls2.gamma", 1.0)
        evict = iv.evict[:, i] if iv.evict is not None else None
        a, p, abstention, logits = attention(layer_norm(x, w, b + ".norm1", cfg.eps), w,
                                             b + ".attn", cfg, evict, rope)
        x = x + ls1 * a
        edit = register_neuron_edit(neurons.get(i, ()), P + R, K)
        m, hidden = mlp(layer_norm(x, w, b + ".norm2", cfg.eps), w, b + ".mlp", cfg, edit)
        x = x + ls2 * m
        if i in iv.inpaint:
            gh, gw = images.shape[-2] // cfg.patch, images.shape[-1] // cfg.patch
            u = None if iv.inpaint_directions is None else iv.inpaint_directions[i]
            repaired = torch.stack([inpaint_artifacts(image, gh, gw, direction=u) for image in x[:, P + R + K:]])
            x = torch.cat([x[:, :P + R + K], repaired], dim=1)
        if trace:
            layers.append({"attn": p, "logits": logits, "abstention": abstention,
                           "mlp_hidden": hidden, "blocks": x,
                           "blocks_normed": final_norm(x, w, cfg),
                           **block_output_statistics(x)})
    xn = final_norm(x, w, cfg)
    patches = xn[:, P + R + K:]
    if cfg.pool == "map":
        pooled = attention_pool(xn, w, cfg)
    else:
        pooled = patches.mean(dim=1)
        if cfg.fc_norm:
            pooled = layer_norm(pooled, w, "fc_norm", cfg.eps)
    out = {"cls": xn[:, 0] if cfg.class_token else pooled, "registers": xn[:, P:P + R + K],
           "patches": patches, "pooled": pooled, "prenorm": x}
    if cfg.proj_dim:
        out["embedding"] = out["cls"] @ w["proj"]
    if trace:
        out["trace"] = {k: torch.stack([layer[k] for layer in layers], dim=1) for k in layers[0]}
        out["trace"]["key_mass"] = out["trace"]["attn"].mean(dim=-2)  # over the queries i
        assert sorted(out["trace"]) == sorted(TRACE_KEYS)
    return out


# ---------------------------------------------------------------------------------------------
# 5. Attention rollout (Abnar & Zuidema)
# ---------------------------------------------------------------------------------------------

HEAD_FUSIONS = ("mean", "max", "min")


def fuse_heads(layer_attn, fuse):
    """One layer's attention [h,N,N] -> [N,N]: the elementwise mean, max or min over heads."""
    assert fuse in HEAD_FUSIONS, fuse
    return {"mean": torch.mean, "max": torch.amax, "min": torch.amin}[fuse](layer_attn, dim=0)


def rollout(attn, fuse="mean", discard=0.0):
    """Attention rollout of one image's attn [L,h,N,N] (docs/design.md, "Artifact metrics") -> [N,N]:
    per layer fuse the heads elementwise (mean | max | min) -> F [N,N]; if discard > 0 zero the
    floor(discard*N*N) smallest entries of F (row-major flat indices, stable sort by value), except
    the entry [0,0], which is never zeroed (so one fewer may be zeroed); A^ = F + I; divide each row
    of A^ by its row sum; result = A^_{L-1} ... A^_1 A^_0 (from the identity, left-multiplying
    each layer in order)."""
    n = attn.shape[-1]
    eye = torch.eye(n, dtype=torch.float64)
    result = eye
    for layer in torch.as_tensor(attn, dtype=torch.float64):
        fused = fuse_heads(layer, fuse)
        if discard > 0:
            flat = fused.flatten().clone()
            smallest = torch.sort(flat, stable=True).indices[:math.floor(discard * n * n)]
            flat[smallest[smallest != 0]] = 0
            fused = flat.reshape(n, n)
        a = fused + eye
        result = (a / a.sum(dim=-1, keepdim=True)) @ result
    return result


# ---------------------------------------------------------------------------------------------
# 6. Dense features
# ---------------------------------------------------------------------------------------------

def upsample_bilinear(features, height, width, compute_dtype=torch.float32):
    """Channels-last feature grid [h,w,C] -> [height,width,C] by torch's bilinear interpolation
    (align_corners False, no antialias), computed in `compute_dtype` (float32, as a float32
    feature map would be) on the [1,C,h,w] layout; returned in the input's dtype.
    Per axis (in size n -> out size m): src = max((i + 0.5) * n / m - 0.5, 0), i0 = floor(src),
    i1 = min(i0 + 1, n - 1), out = (1 - t) in[i0] + t in[i1] with t = src - i0."""
    features = torch.as_tensor(features)
    x = features.to(compute_dtype).permute(2, 0, 1)[None]
    y = F.interpolate(x, size=(height, width), mode="bilinear", align_corners=False,
                      antialias=False)
    return y[0].permute(1, 2, 0).to(features.dtype)


# ---------------------------------------------------------------------------------------------
# 7. Interventions (docs/design.md, "Interventions and the study"): which keys to evict, sink
# calibration, register neurons
# ---------------------------------------------------------------------------------------------

def image_list(images):
    """[B,3,H,W] tensor, or a sequence of [3,H,W] / [b,3,H,W] tensors (sizes may differ) ->
    list of float64 [1,3,H,W] tensors, one per image."""
    if torch.is_tensor(images):
        images = [images]
    result = []
    for item in images:
        item = torch.as_tensor(item, dtype=torch.float64)
        result += [item[None]] if item.dim() == 3 else [one[None] for one in item]
    return result


def sink_keys(trace):
    """Sink key of every image, layer and head: argmax over keys of the trace's key_mass
    [B,L,h,N] (the lowest index on ties) -> long [B,L,h]."""
    mass = trace["key_mass"]
    index = torch.arange(mass.shape[-1]).expand(mass.shape)
    top = mass == mass.amax(dim=-1, keepdim=True)
    return torch.where(top, index, mass.shape[-1]).amin(dim=-1)


def median(values):
    """Median of a 1-D tensor; an even count gives the mean of the two middle values."""
    ordered = torch.sort(torch.as_tensor(values).flatten()).values
    mid = ordered.numel() // 2
    return ordered[mid] if ordered.numel() % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def artifact_tokens(prenorm, registers, mad_k=10.0, prefix=1):
    """The robust (model-free) artifact rule of docs/design.md, "Artifact metrics" on the final block's output before
    the final norm, prenorm [B,N,D] -> per image the list of flagged token indices (prenorm's:
    CLS = 0 when there is one).
    `registers` counts every register token (trained + test-time) and `prefix` the tokens
    before them (1: the class token; 0 without one, `prefix_tokens(cfg)`): the patches are
    tokens prefix + registers .. N-1, and only they are candidates. norm = L2 over channels;
    threshold = median + mad_k * MAD over the patch norms, median of an even count = mean of
    the two middle values, MAD = median |norm - median| (unscaled); flagged: norm > threshold.
    (vitreg's C++ `median_of` rule.)"""
    first = prefix + registers
    result = []
    for image in torch.as_tensor(prenorm, dtype=torch.float64):
        norms = image[first:].norm(dim=-1)
        mid = median(norms)
        threshold = mid + mad_k * median((norms - mid).abs())
        result.append([first + i for i in range(norms.numel()) if norms[i] > threshold])
    return result


def eviction_mask(B, L, h, N, tokens=(), per_image=None, per_head=None):
    """bool [B,L,h,N] eviction mask (see `Intervention`): the keys in `tokens` for every image,
    layer and head; `per_image` (B lists of token indices) for every layer and head of that
    image; `per_head` (long [B,L,h] or [B,L,h,k]) the keys of one image, layer and head (e.g.
    `sink_keys`). The union of all three."""
    mask = torch.zeros(B, L, h, N, dtype=torch.bool)
    for token in tokens:
        mask[..., token] = True
    for b, image_tokens in enumerate(per_image or ()):
        for token in image_tokens:
            mask[b, ..., token] = True
    if per_head is not None:
        keys = torch.as_tensor(per_head, dtype=torch.long)
        keys = keys[..., None] if keys.dim() == 3 else keys
        mask.scatter_(-1, keys, True)
    return mask


def sink_calibration_mass(logits, keys, sinks):
    """The mass function of sink calibration (docs/design.md, "Interventions and the study"): for every layer l and head h, the
    mean over images i and their queries q of e^s / (e^s + sum_{j != k_i} e^{z_qj}) =
    sigmoid(s - logsumexp_{j != k_i} z_qj), with k_i = keys[i, l, h] and s = sinks [L,h].
    `logits`: a list (one per image) of the unmodified model's logits [L,h,N,N] (the trace's,
    which may differ in N), keys long [B,L,h] -> [L,h]. Monotone increasing in s."""
    return _calibration_mass(_rest_logsumexp(logits, keys), sinks)


def _calibration_mass(rests, sinks):
    """sink_calibration_mass from the per-image `_rest_logsumexp` [L,h,N]."""
    return torch.stack([torch.sigmoid(sinks[..., None] - rest).mean(dim=-1)
                        for rest in rests]).mean(dim=0)


def _rest_logsumexp(logits, keys):
    """Per image: logsumexp over the keys j != k_i of each query's logits -> [L,h,N]."""
    rests = []
    for z, key in zip(logits, keys):
        drop = F.one_hot(key, z.shape[-1]).bool()[..., None, :]        # [L,h,1,N]
        rests.append(z.masked_fill(drop, -math.inf).logsumexp(dim=-1))
    return rests


def calibrate_sink(cfg, w, images, lo=-30.0, hi=30.0, width=1e-6):
    """Sink calibration (docs/design.md, "Interventions and the study"): retrofit each softmax head into a sink head.
    images: see `image_list` (each image runs alone, so nothing depends on batching).
    Runs the unmodified model with trace; for layer l and head h, k_i = the sink key of image i
    (`sink_keys`), a = mean over images of (mean over that image's queries of A[q, k_i]) (its
    key_mass); s = the root of sink_calibration_mass(s) = a by bisection on [lo, hi]: while the
    interval is at least `width` wide, mid = (lo + hi) / 2 replaces lo when mass(mid) < a, else
    hi; s = the final midpoint. All heads bisect together, in float64.
    Returns (sinks [L,h], target a [L,h], keys long [B,L,h])."""
    traces = [forward(cfg, w, x, trace=True)["trace"] for x in image_list(images)]
    keys = torch.cat([sink_keys(t) for t in traces])                    # [B,L,h]
    target = torch.cat([t["key_mass"] for t in traces]).gather(-1, keys[..., None])[..., 0].mean(0)
    rests = _rest_logsumexp([t["logits"][0] for t in traces], keys)
    lo = torch.full_like(target, lo)
    hi = torch.full_like(target, hi)
    while (hi - lo).max() >= width:
        mid = 0.5 * (lo + hi)
        below = _calibration_mass(rests, mid) < target
        lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
    return 0.5 * (lo + hi), target, keys


def register_neuron_scores(cfg, w, images, mad_k=10.0):
    """Register-neuron scores (docs/design.md, "Interventions and the study", Jiang et al. 2025) -> [L, H].
    images: see `image_list`. Each image runs unmodified; its outlier positions are
    `artifact_tokens` of its prenorm (final block, before the final norm, robust rule, `mad_k`).
    score(l, n) = mean over the images with at least one outlier of (mean |mlp_hidden[l, pos, n]|
    over that image's outlier positions pos); images without outliers are skipped; if no image
    has any, ValueError."""
    per_image = []
    for x in image_list(images):
        out = forward(cfg, w, x, trace=True)
        positions = artifact_tokens(out["prenorm"], cfg.registers, mad_k, prefix_tokens(cfg))[0]
        if positions:
            per_image.append(out["trace"]["mlp_hidden"][0][:, positions].abs().mean(dim=1))
    if not per_image:
        raise ValueError("register_neuron_scores: no image has outlier tokens")
    return torch.stack(per_image).mean(dim=0)
