#include "core/checkpoint/open_clip_keys.hpp"

namespace vitreg::source {

// CLIPVisionCfg. The timm_* keys only matter
// with timm_model_name, which refuse_unknown_model refuses.
const std::vector<ConfigKey>& open_clip_vision_keys() {
    using J = nlohmann::json;
    static const std::vector<ConfigKey> keys = {
        {"layers"}, {"width"}, {"head_width"}, {"patch_size"}, {"image_size"},  // checked against the tensors
        {"mlp_ratio"}, {"ls_init_value"}, {"no_ln_pre"},                         // the tensors tell (fc1, ls_1, ln_pre)
        {"pool_type"}, {"final_ln_after_pool"}, {"norm_kwargs"}, {"act_kwargs"},  // open_clip_read_config, activation
        {"timm_model_name"},                                                       // refuse_unknown_model
        {"patch_dropout", KeyUse::Inert}, {"output_tokens", KeyUse::Inert}, {"image_seq_len", KeyUse::Inert},
        {"attn_pooler_queries", KeyUse::Inert}, {"attn_pooler_heads", KeyUse::Inert},
        {"timm_model_pretrained", KeyUse::Inert}, {"timm_pool", KeyUse::Inert}, {"timm_proj", KeyUse::Inert},
        {"timm_proj_bias", KeyUse::Inert}, {"timm_drop", KeyUse::Inert}, {"timm_drop_path", KeyUse::Inert},
        {"timm_model_kwargs", KeyUse::Inert},
        // A fixed sin-cos table is stored as positional_embedding like a learned one.
        {"pos_embed_type", KeyUse::Runs, {J(), J("learnable"), J("sin_cos_2d")}},
        {"attentional_pool", KeyUse::Runs, {J(), J(false)}},
        {"block_type", KeyUse::Runs, {J(), J("default")}},
        {"qk_norm", KeyUse::Runs, {J(), J(false)}},
        {"scaled_cosine_attn", KeyUse::Runs, {J(), J(false)}},
        {"scale_heads", KeyUse::Runs, {J(), J(false)}},
        {"scale_attn_inner", KeyUse::Runs, {J(), J(false)}},
        {"scale_attn", KeyUse::Runs, {J(), J(false)}},
        {"scale_fc", KeyUse::Runs, {J(), J(false)}},
    };
    return keys;
}

// open_clip's model_cfg: the CLIP / CustomTextCLIP / CoCa constructors' arguments.
const std::vector<ConfigKey>& open_clip_model_keys() {
    static const std::vector<ConfigKey> keys = {
        {"embed_dim"}, {"vision_cfg"}, {"quick_gelu"},
        {"text_cfg", KeyUse::Inert}, {"multimodal_cfg", KeyUse::Inert}, {"custom_text", KeyUse::Inert},
        {"init_logit_scale", KeyUse::Inert}, {"init_logit_bias", KeyUse::Inert}, {"nonscalar_logit_scale", KeyUse::Inert},
        {"output_dict", KeyUse::Inert}, {"pad_id", KeyUse::Inert},
        // LayerNormFp32 under a half cast_dtype: vitreg's norms run in float32 already.
        {"cast_dtype", KeyUse::Inert},
    };
    return keys;
}

}  // namespace vitreg::source
