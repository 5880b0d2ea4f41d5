// CLIP vision towers (docs/design.md, "Families"): OpenAI's and OpenCLIP's `visual.*` (+
// open_clip_config.json), HF transformers' CLIPModel / CLIPVisionModel(WithProjection)
// `vision_model.*`, and HF's SigLIP tower, which has CLIP's names but no class token and an
// attention-pool (MAP) head. Canonical names on the left; `proj` is [D, E] as OpenCLIP stores it
// (HF's visual_projection.weight is its transpose).
#include "core/checkpoint/config_keys.hpp"
#include "core/checkpoint/hf_config_keys.hpp"
#include "core/checkpoint/open_clip_keys.hpp"
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

// OpenAI's weights run QuickGELU: open_clip's config says, and without one OpenAI's is assumed.
// vision_cfg.act_kwargs reach nn.GELU: {"approximate": "tanh"} is GELU's tanh form.
void open_clip_activation(Config& c, const SideFiles& side, Notes& notes) {
    if (c.mlp == MlpKind::SwiGlu) return;
    if (const auto* q = dig(side.open_clip, {"model_cfg", "quick_gelu"})) {
        if (!q->is_boolean()) throw ConfigError(side.open_clip_file + ": 'model_cfg.quick_gelu' is not true or false");
        if (q->get<bool>()) c.mlp = MlpKind::QuickGelu;
    } else if (side.open_clip.is_null()) {
        c.mlp = MlpKind::QuickGelu;
        notes.add(NoteTopic::Activation, "no open_clip_config.json beside the weights: assumed OpenAI's QuickGELU");
    }
    const auto* vision = side.vision_cfg();
    const auto* kwargs = vision ? dig(*vision, {"act_kwargs"}) : nullptr;
    if (!kwargs) return;
    const auto* approximate = dig(*kwargs, {"approximate"});
    const bool gelu_form = c.mlp == MlpKind::Gelu && kwargs->is_object() && kwargs->size() == 1 && approximate &&
                           (*approximate == "tanh" || *approximate == "none");
    if (!gelu_form)
        throw ConfigError(side.open_clip_file + ": model_cfg.vision_cfg.act_kwargs = " + quoted_value(*kwargs) +
                          " is not a setting vitreg runs (it runs nn.GELU's {\"approximate\": \"tanh\"} or \"none\")");
    if (*approximate == "tanh") c.mlp = MlpKind::GeluTanh;
}

void open_clip_check_keys(const SideFiles& side) {
    const auto* model = dig(side.open_clip, {"model_cfg"});
    if (!model) return;
    check_config_keys(*model, open_clip_model_keys(), side.open_clip_file, "model_cfg.", "open_clip's model_cfg");
    if (const auto* vision = side.vision_cfg())
        check_config_keys(*vision, open_clip_vision_keys(), side.open_clip_file, "model_cfg.vision_cfg.",
                          "open_clip's CLIPVisionCfg");
}

bool vision_flag(const SideFiles& side, const char* key) {
    const auto* vision = side.vision_cfg();
    const auto* v = vision ? dig(*vision, {key}) : nullptr;
    if (!v) return false;
    if (!v->is_boolean()) throw ConfigError(side.open_clip_file + ": 'model_cfg.vision_cfg." + key + "' is not true or false");
    return v->get<bool>();
}

// final_ln_after_pool: ln_post normalizes the pooled feature only, as timm's fc_norm does, and
// the tokens leave the blocks unnormalized (open_clip's VisionTransformer._pool).
void open_clip_side_names(const SideFiles& side, NameTable& t) {
    if (!vision_flag(side, "final_ln_after_pool")) return;
    for (auto& [canonical, stored] : t.top)
        if (canonical == "norm.") canonical = "fc_norm.";
}

// pool_type: what `encode_image` projects, the class token ('tok') or the mean of the patches
// ('avg'); 'none' projects every token, which is no one feature. norm_kwargs: ln_post's and the
// blocks' eps.
void open_clip_read_config(Config& c, const SideFiles& side, Notes&) {
    const auto* vision = side.vision_cfg();
    if (!vision) return;
    const std::string file = side.open_clip_file;
    const nlohmann::json pool = dig(*vision, {"pool_type"}) ? *dig(*vision, {"pool_type"}) : nlohmann::json("tok");
    if (pool == "tok") c.pool = Pool::Token;  // (with final_ln_after_pool the tensors alone would say avg)
    else if (pool == "avg") c.pool = Pool::Avg;
    else
        throw ConfigError(file + ": model_cfg.vision_cfg.pool_type = " + quoted_value(pool) +
                          " is not a setting vitreg runs (it runs \"tok\" and \"avg\": one embedding per image)");
    if (const auto* n = dig(*vision, {"norm_kwargs"})) {
        check_config_keys(*n, {{"eps"}}, file, "model_cfg.vision_cfg.norm_kwargs.", "LayerNorm's keyword arguments");
        if (const auto* eps = dig(*n, {"eps"})) c.eps = static_cast<float>(json_number(*eps, file, "model_cfg.vision_cfg.norm_kwargs.eps"));
    }
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
    s.check_keys = open_clip_check_keys;
    s.side_names = open_clip_side_names;
    s.read_config = open_clip_read_config;
    s.family = [](const Config&, const SideFiles&) { return Family::Clip; };
    s.pos_interp = [](const Config&, const SideFiles&) { return PosInterp::Antialias; };  // resize_pos_embed
    s.pipeline = PixelPipeline::OpenClip;
    s.activation = open_clip_activation;
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
    s.check_keys = [](const SideFiles& side) { check_hf_keys(side, hf_clip_vision_keys(), &hf_clip_keys()); };
    s.family = [](const Config&, const SideFiles&) { return Family::Clip; };
    // CLIPVisionConfig's default is QuickGELU.
    s.activation = [](Config& c, const SideFiles& side, Notes&) {
        if (c.mlp != MlpKind::SwiGlu) c.mlp = hf_activation(side, "quick_gelu");
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
    s.check_keys = [](const SideFiles& side) { check_hf_keys(side, hf_siglip_vision_keys(), &hf_siglip_keys()); };
    s.family = [](const Config&, const SideFiles&) { return Family::Siglip; };
    // SiglipVisionConfig's default, which a SiglipModel's vision_config may leave out.
    s.activation = [](Config& c, const SideFiles& side, Notes&) {
        if (c.mlp != MlpKind::SwiGlu) c.mlp = hf_activation(side, "gelu_pytorch_tanh");
    };
    return s;
}

}  // namespace vitreg::source
