// CLIP vision towers (docs/design.md, "Families"): OpenAI's and OpenCLIP's `visual.*` (+
// open_clip_config.json), HF transformers' CLIPModel / CLIPVisionModel(WithProjection)
// `vision_model.*`, and HF's SigLIP tower, which has CLIP's names but no class token and an
// attention-pool (MAP) head. Canonical names on the left; `proj` is [D, E] as OpenCLIP stores it
// (HF's visual_projection.weight is its transpose).
#include "core/checkpoint/source.hpp"
#include "vitreg/error.hpp"

namespace vitreg::source {

namespace {

const char* const kHfMarker = "vision_model.embeddings.patch_embedding.weight";

const NamePairs kHfBlock = {
    {"norm1.", "layer_norm1."},         {"norm2.", "layer_norm2."}, {"attn.proj.", "self_attn.out_proj."},
    {"mlp.fc1.", "mlp.fc1."},           {"mlp.fc2.", "mlp.fc2."},
    {"attn.qkv.", "self_attn.q_proj.|self_attn.k_proj.|self_attn.v_proj."},
};

// HF's towers: a two-tower model's config.json (its vision_config), the image processor's config.
Source hf_tower(const std::string& name) {
    Source s;
    s.name = name;
    s.side_files = SideFormat::HfTowerConfig;
    s.reads_preprocessor = true;
    s.pos_interp = [](const Config&, const SideFiles&) { return PosInterp::Size; };  // interpolate_pos_encoding
    s.pipeline = PixelPipeline::HF;
    s.finish = [](const TensorFile&, const std::string&, Config& c, Notes& notes) {
        if (c.heads != kHeadsUnstated) return;
        c.heads = 12;  // transformers' CLIPVisionConfig and SiglipVisionConfig default, which config.json leaves out
        notes.add(NoteTopic::Heads, "num_attention_heads not in config.json; HF's default 12");
    };
    return s;
}

// HF's tower, with or without a class token.
std::optional<std::string> hf_tower_prefix(const TensorFile& f, bool class_token) {
    auto prefix = prefix_before(f, kHfMarker);
    if (!prefix || f.has(*prefix + "vision_model.embeddings.class_embedding") != class_token) return std::nullopt;
    return prefix;
}

}  // namespace

Source open_clip_source() {
    Source s;
    s.name = "open-clip";
    s.match = [](const TensorFile& f) -> std::optional<std::string> {
        auto prefix = prefix_before(f, "visual.conv1.weight");
        if (!prefix) return std::nullopt;
        return *prefix + "visual.";
    };
    s.names = [](const TensorFile&, const std::string&) {
        NameTable t;
        t.top = {
            {"cls_token", "class_embedding"},   {"pos_embed", "positional_embedding"}, {"patch_embed.proj.", "conv1."},
            {"norm_pre.", "ln_pre."},           {"norm.", "ln_post."},                 {"proj", "proj"},
        };
        t.block_prefix = "transformer.resblocks.";
        t.block = {
            {"norm1.", "ln_1."},
            {"norm2.", "ln_2."},
            {"attn.qkv.weight", "attn.in_proj_weight"},
            {"attn.qkv.bias", "attn.in_proj_bias"},
            {"attn.proj.", "attn.out_proj."},
            {"mlp.fc1.", "mlp.c_fc."},
            {"mlp.fc2.", "mlp.c_proj."},
            {"ls1.gamma", "ls_1.gamma"},
            {"ls2.gamma", "ls_2.gamma"},
        };
        return t;
    };
    s.side_files = SideFormat::OpenClipConfig;
    s.family = [](const Config&, const SideFiles&) { return Family::Clip; };
    s.pos_interp = [](const Config&, const SideFiles&) { return PosInterp::Antialias; };  // resize_pos_embed
    s.pipeline = PixelPipeline::OpenClip;
    // OpenAI's weights run QuickGELU: open_clip's config says, and without one OpenAI's is assumed.
    s.activation = [](Config& c, const SideFiles& side, Notes& notes) {
        if (c.mlp == MlpKind::SwiGlu) return;
        if (const auto* q = dig(side.open_clip, {"model_cfg", "quick_gelu"})) {
            if (!q->is_boolean()) throw ConfigError(side.open_clip_file + ": 'model_cfg.quick_gelu' is not true or false");
            if (q->get<bool>()) c.mlp = MlpKind::QuickGelu;
        } else if (side.open_clip.is_null()) {
            c.mlp = MlpKind::QuickGelu;
            notes.add(NoteTopic::Activation, "no open_clip_config.json beside the weights: assumed OpenAI's QuickGELU");
        }
    };
    return s;
}

Source hf_clip_source() {
    Source s = hf_tower("hf-clip");
    s.match = [](const TensorFile& f) { return hf_tower_prefix(f, true); };
    s.names = [](const TensorFile&, const std::string&) {
        NameTable t;
        t.top = {
            {"cls_token", "vision_model.embeddings.class_embedding"},
            {"pos_embed", "vision_model.embeddings.position_embedding.weight"},
            {"patch_embed.proj.", "vision_model.embeddings.patch_embedding."},
            {"norm_pre.", "vision_model.pre_layrnorm."},  // sic
            {"norm.", "vision_model.post_layernorm."},
            {"proj", "visual_projection.weight"},
        };
        t.block_prefix = "vision_model.encoder.layers.";
        t.block = kHfBlock;
        t.proj_transposed = true;
        return t;
    };
    s.hf_model_types = {"clip", "clip_vision_model"};
    s.hf_architectures = {"CLIPModel", "CLIPVisionModel", "CLIPVisionModelWithProjection"};
    s.family = [](const Config&, const SideFiles&) { return Family::Clip; };
    // CLIPVisionConfig's default is QuickGELU.
    s.activation = [](Config& c, const SideFiles& side, Notes&) {
        if (c.mlp == MlpKind::SwiGlu) return;
        const std::string act = side.cfg_str("hidden_act").value_or("quick_gelu");
        if (act != "gelu" && act != "quick_gelu")
            throw ConfigError(side.cfg_file + ": hidden_act '" + act + "' (vitreg runs gelu or quick_gelu)");
        if (act == "quick_gelu") c.mlp = MlpKind::QuickGelu;
    };
    return s;
}

Source hf_siglip_source() {
    Source s = hf_tower("hf-siglip");
    s.match = [](const TensorFile& f) { return hf_tower_prefix(f, false); };
    // No class token or pre-norm, and the attention-pool head (canonical names timm's
    // AttentionPoolLatent's, with q, k and v as one in_proj).
    s.names = [](const TensorFile&, const std::string&) {
        NameTable t;
        t.top = {
            {"pos_embed", "vision_model.embeddings.position_embedding.weight"},
            {"patch_embed.proj.", "vision_model.embeddings.patch_embedding."},
            {"norm.", "vision_model.post_layernorm."},
            {"attn_pool.latent", "vision_model.head.probe"},
            {"attn_pool.qkv.weight", "vision_model.head.attention.in_proj_weight"},
            {"attn_pool.qkv.bias", "vision_model.head.attention.in_proj_bias"},
            {"attn_pool.proj.", "vision_model.head.attention.out_proj."},
            {"attn_pool.norm.", "vision_model.head.layernorm."},
            {"attn_pool.mlp.", "vision_model.head.mlp."},
        };
        t.block_prefix = "vision_model.encoder.layers.";
        t.block = kHfBlock;
        return t;
    };
    s.hf_model_types = {"siglip", "siglip_vision_model"};
    s.hf_architectures = {"SiglipModel", "SiglipVisionModel"};
    s.family = [](const Config&, const SideFiles&) { return Family::Siglip; };
    // SiglipVisionConfig's default, which a SiglipModel's vision_config may leave out.
    s.activation = [](Config& c, const SideFiles& side, Notes&) {
        if (c.mlp == MlpKind::SwiGlu) return;
        const std::string act = side.cfg_str("hidden_act").value_or("gelu_pytorch_tanh");
        const bool tanh = act == "gelu_pytorch_tanh" || act == "gelu_new", quick = act == "quick_gelu";
        if (!tanh && !quick && act != "gelu")
            throw ConfigError(side.cfg_file + ": hidden_act '" + act + "' (vitreg runs gelu, gelu_pytorch_tanh or quick_gelu)");
        if (quick) c.mlp = MlpKind::QuickGelu;
        if (tanh) c.mlp = MlpKind::GeluTanh;
    };
    return s;
}

}  // namespace vitreg::source
