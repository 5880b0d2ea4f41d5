#include "core/checkpoint/hf_config_keys.hpp"

#include <algorithm>

#include "core/checkpoint/side_files.hpp"

namespace vitreg::source {

namespace {

using J = nlohmann::json;

ConfigKey inert(const char* key) { return {key, KeyUse::Inert}; }

// PreTrainedConfig's keys (configuration_utils.py: v5's fields and __post_init__ pops, v4's
// __init__ pops) and the generation defaults v4 kept in every config. None changes a vision
// encoder's forward except these: pruned heads, quantization, per-layer overrides and rope scaling.
std::vector<ConfigKey> generic_keys() {
    std::vector<ConfigKey> keys = {
        {"model_type"}, {"architectures"},  // refuse_unknown_model
        {"pruned_heads", KeyUse::Runs, {J(), J::object()}},
        {"quantization_config", KeyUse::Runs, {J()}},
        {"per_layer_config", KeyUse::Runs, {J()}},  // HeterogeneousConfigMixin: layers unlike each other
        {"rope_scaling", KeyUse::Runs, {J()}},
        // Used only with rope_scaling, which no vision config here has (DINOv3 reads its own).
        inert("rope_theta"),
    };
    // Bookkeeping, outputs asked for, the attention kernel (all compute the same softmax), the
    // classifier head and the text side's token ids.
    for (const char* k : {"transformers_version", "_name_or_path", "name_or_path", "_commit_hash", "_auto_class",
                          "_attn_implementation", "_attn_implementation_autoset", "_attn_implementation_internal",
                          "attn_implementation", "_experts_implementation", "experts_implementation",
                          "_output_attentions", "output_attentions", "output_hidden_states", "return_dict", "torchscript",
                          "torch_dtype", "dtype", "use_bfloat16", "tf_legacy_loss", "xla_device", "gradient_checkpointing",
                          "tie_word_embeddings", "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder",
                          "cross_attention_hidden_size", "add_cross_attention", "tie_encoder_decoder", "is_composition",
                          "attribute_map", "base_config_key", "sub_configs", "base_model_pp_plan", "base_model_tp_plan",
                          "base_model_ep_plan", "distributed_config", "has_no_defaults_at_init",
                          "ignore_keys_at_rope_validation",
                          "finetuning_task", "id2label", "label2id", "num_labels", "problem_type", "tokenizer_class",
                          "prefix", "bos_token_id", "pad_token_id", "eos_token_id", "sep_token_id",
                          "decoder_start_token_id", "task_specific_params"})
        keys.push_back(inert(k));
    // The generation defaults (v4's _get_global_generation_defaults, v5's
    // GenerationConfig._get_default_generation_params): generate() only.
    for (const char* k : {"max_length", "min_length", "do_sample", "use_cache", "early_stopping", "num_beams",
                          "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
                          "repetition_penalty", "encoder_repetition_penalty", "length_penalty", "no_repeat_ngram_size",
                          "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
                          "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
                          "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "epsilon_cutoff",
                          "eta_cutoff", "num_assistant_tokens", "num_assistant_tokens_schedule",
                          "assistant_confidence_threshold", "assistant_lookbehind", "target_lookbehind"})
        keys.push_back(inert(k));
    return keys;
}

// A class's own keys over PreTrainedConfig's.
HfKeyTable table(std::string what, std::vector<ConfigKey> own, std::vector<std::string> upstream) {
    upstream.insert(upstream.end(), {"PreTrainedConfig", "generation"});
    for (auto& k : generic_keys())
        if (std::none_of(own.begin(), own.end(), [&](const ConfigKey& o) { return o.key == k.key; })) own.push_back(std::move(k));
    return {"transformers' " + what, std::move(own), std::move(upstream)};
}

// The backbone API's (BackboneConfigMixin; Dinov2Backbone, DINOv3ViTBackbone): which stages a
// backbone returns, not what the model computes.
const char* const kBackbone[] = {"out_features", "out_indices", "_out_features", "_out_indices", "stage_names",
                                 "apply_layernorm", "reshape_hidden_states"};

std::vector<ConfigKey> with_backbone(std::vector<ConfigKey> keys) {
    for (const char* k : kBackbone) keys.push_back(inert(k));
    return keys;
}

// Patches have three channels (patch_embed [D, 3, p, p]); a quantized save's dtype before
// quantization (modeling_clip.py, modeling_siglip.py read it).
const ConfigKey kChannels{"num_channels", KeyUse::Runs, {J(3)}};
const ConfigKey kPreQuantization{"_pre_quantization_dtype", KeyUse::Runs, {J()}};

}  // namespace

// resolve.cpp checks the shapes and switches against the tensors (check_consistency).
const HfKeyTable& hf_dinov2_keys() {
    static const HfKeyTable t = table(
        "Dinov2Config or Dinov2WithRegistersConfig",
        with_backbone({
            {"hidden_size"}, {"num_hidden_layers"}, {"num_attention_heads"}, {"mlp_ratio"}, {"hidden_act"},
            {"layer_norm_eps"}, {"image_size"}, {"patch_size"}, {"qkv_bias"}, {"use_swiglu_ffn"}, {"num_register_tokens"},
            kChannels,
            inert("hidden_dropout_prob"), inert("attention_probs_dropout_prob"), inert("drop_path_rate"),
            inert("initializer_range"), inert("layerscale_value"),  // LayerScale's init: the tensors carry it
            inert("use_mask_token"),                                 // masked pretraining's token
            inert("embedding_size"),  // modeling_dinov2.py: only waives a divisibility check
            // Dinov2WithRegistersConfig's first version (modeling then interpolated with scale
            // factor (h + offset) / M, antialiased as asked); today's always antialiases by size,
            // as vitreg does for registers.
            {"interpolate_antialias", KeyUse::Runs, {J(true)}},
            {"interpolate_offset", KeyUse::Runs, {J(0)}},
        }),
        {"Dinov2Config", "Dinov2WithRegistersConfig", "BackboneConfigMixin"});
    return t;
}

const HfKeyTable& hf_clip_vision_keys() {
    static const HfKeyTable t = table(
        "CLIPVisionConfig",
        {
            // projection_dim: checked in a flat config (CLIPVisionModelWithProjection); CLIPModel uses its top level's.
            {"hidden_size"}, {"intermediate_size"}, {"projection_dim"}, {"num_hidden_layers"}, {"num_attention_heads"},
            {"image_size"}, {"patch_size"}, {"hidden_act"}, {"layer_norm_eps"}, kChannels, kPreQuantization,
            inert("attention_dropout"), inert("initializer_range"), inert("initializer_factor"),
            inert("dropout"),  // until 2023; the openai/clip-* files carry it
        },
        {"CLIPVisionConfig"});
    return t;
}

const HfKeyTable& hf_clip_keys() {
    static const HfKeyTable t = table(
        "CLIPConfig",
        {
            {"vision_config"}, {"vision_config_dict"}, {"projection_dim"},
            inert("text_config"), inert("text_config_dict"), inert("logit_scale_init_value"), inert("initializer_factor"),
        },
        {"CLIPConfig"});
    return t;
}

const HfKeyTable& hf_siglip_vision_keys() {
    static const HfKeyTable t = table(
        "SiglipVisionConfig",
        {
            {"hidden_size"}, {"intermediate_size"}, {"num_hidden_layers"}, {"num_attention_heads"}, {"image_size"},
            {"patch_size"}, {"hidden_act"}, {"layer_norm_eps"}, kChannels, kPreQuantization,
            {"vision_use_head"},  // modeling_siglip.py: the attention-pool head, or none
            inert("attention_dropout"),
        },
        {"SiglipVisionConfig"});
    return t;
}

const HfKeyTable& hf_siglip_keys() {
    static const HfKeyTable t =
        table("SiglipConfig", {{"vision_config"}, inert("text_config"), inert("initializer_factor")}, {"SiglipConfig"});
    return t;
}

const HfKeyTable& hf_dinov3_keys() {
    static const HfKeyTable t = table(
        "DINOv3ViTConfig",
        with_backbone({
            {"hidden_size"}, {"intermediate_size"}, {"num_hidden_layers"}, {"num_attention_heads"}, {"hidden_act"},
            {"layer_norm_eps"}, {"rope_theta"}, {"image_size"}, {"patch_size"}, {"num_register_tokens"},
            {"query_bias"}, {"key_bias"}, {"value_bias"}, {"proj_bias"}, {"mlp_bias"}, {"use_gated_mlp"}, kChannels,
            inert("attention_dropout"), inert("initializer_range"), inert("drop_path_rate"), inert("layerscale_value"),
            // modeling_dinov3_vit.py augments the rotary coordinates with these only `if self.training`.
            inert("pos_embed_shift"), inert("pos_embed_jitter"), inert("pos_embed_rescale"),
            inert("return_class_token"),  // DINOv3ViTBackbone's outputs
        }),
        {"DINOv3ViTConfig", "BackboneConfigMixin"});
    return t;
}

// ViTModel's pooler is not run (hf_vit.cpp), so its width and activation change nothing vitreg
// computes; encoder_stride sizes ViTForMaskedImageModeling's decoder.
const HfKeyTable& hf_vit_keys() {
    static const HfKeyTable t = table(
        "ViTConfig",
        {
            {"hidden_size"}, {"num_hidden_layers"}, {"num_attention_heads"}, {"intermediate_size"}, {"hidden_act"},
            {"layer_norm_eps"}, {"image_size"}, {"patch_size"}, {"qkv_bias"}, kChannels,
            {"head_dim"},  // modeling_vit.py's getattr: held to hidden_size / num_attention_heads
            inert("embedding_size"),  // modeling_vit.py before v5: only waives a divisibility check
            inert("hidden_dropout_prob"), inert("attention_probs_dropout_prob"), inert("initializer_range"),
            inert("encoder_stride"), inert("pooler_output_size"), inert("pooler_act"),
        },
        {"ViTConfig"});
    return t;
}

std::vector<const HfKeyTable*> hf_key_tables() {
    return {&hf_vit_keys(),   &hf_dinov2_keys(),        &hf_clip_vision_keys(), &hf_clip_keys(),
            &hf_siglip_vision_keys(), &hf_siglip_keys(), &hf_dinov3_keys()};
}

void check_hf_keys(const SideFiles& side, const HfKeyTable& vision, const HfKeyTable* towers) {
    const bool two_towers = towers && side.top.is_object() && side.top.contains("vision_config");
    if (two_towers) {
        check_config_keys(side.top, towers->keys, side.cfg_file, "", towers->what);
        if (const auto* d = dig(side.top, {"vision_config_dict"}))
            check_config_keys(*d, vision.keys, side.cfg_file, "vision_config_dict.", vision.what);
    }
    check_config_keys(side.cfg, vision.keys, side.cfg_file, two_towers ? "vision_config." : "", vision.what);
}

}  // namespace vitreg::source
