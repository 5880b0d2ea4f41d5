// Looks a timm hub config's `architecture` up in timm's definitions and refuses what vitreg's
// forward does not run, by the argument's name and value.
#include "core/checkpoint/timm_architectures.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "core/checkpoint/config_keys.hpp"
#include "vitreg/error.hpp"

namespace vitreg::source {

namespace {

struct Row {
    const char* name;
    const char* model_class;
    const char* args;  // JSON
};

// A parameter of a timm model class's __init__.
struct Parameter {
    const char* model_class;
    const char* key;
};

#define TIMM_ROW(name, model_class, args) {name, model_class, args},
#define TIMM_PARAMETER(model_class, key)
constexpr Row kRows[] = {
#include "core/checkpoint/timm_architectures.inc"
};
#undef TIMM_ROW
#undef TIMM_PARAMETER
#define TIMM_ROW(name, model_class, args)
#define TIMM_PARAMETER(model_class, key) {model_class, key},
constexpr Parameter kParameters[] = {
#include "core/checkpoint/timm_architectures.inc"
};
#undef TIMM_ROW
#undef TIMM_PARAMETER

// An argument and the values of it vitreg runs (a JSON array), with what the others would need.
struct Runs {
    const char* key;
    const char* values;
    const char* why;
};

// timm's VisionTransformer (vision_transformer.py): vitreg runs its pre-norm Block with the fused
// qkv Attention, the fc1/fc2 Mlp and LayerNorm, learned positions over a PatchEmbed.
constexpr Runs kVisionTransformer[] = {
    {"act_layer", R"(["gelu","gelu_tanh","quick_gelu"])", "an MLP activation other than GELU, its tanh form and QuickGELU"},
    {"mlp_layer", R"(["Mlp"])", "a gated MLP under VisionTransformer's names"},
    {"norm_layer", R"(["layernorm"])", "RMSNorm"},
    {"embed_norm_layer", "[null]", "a norm in the patch embedding"},
    {"embed_layer", R"(["PatchEmbed"])", "another patch embedding"},
    {"block_fn", R"(["Block"])", "another transformer block"},
    {"attn_layer", R"(["Attention"])", "another attention"},
    {"qk_norm", "[false]", "normed queries and keys"},
    {"proj_bias", "[true]", "an attention projection without bias"},
    {"pos_embed", R"(["learn"])", "positions other than a learned embedding"},
    {"pool_include_prefix", "[false]", "a pool over the prefix tokens too"},
    {"dynamic_img_pad", "[false]", "padded inputs"},
    {"global_pool", R"(["token","avg","map"])", "another pooled feature"},
    {"in_chans", "[3]", "an input of other than 3 channels"},
    {"final_norm", "[true]", "no final norm"},
};

// VisionTransformer's other parameters (kVisionTransformer holds the rest). Read: vitreg reads it,
// or the tensors' shapes hold it (timm saved them built so, and its load refuses others).
const std::vector<ConfigKey>& vision_transformer_keys() {
    static const std::vector<ConfigKey> keys = {
        {"img_size"}, {"patch_size"}, {"embed_dim"}, {"depth"},  // pos_embed's grid, patch_embed, the blocks
        {"num_heads"},                                           // read (timm_heads)
        {"mlp_ratio"},                                           // fc1's width
        {"qkv_bias"}, {"init_values"},                           // the qkv bias, ls1/ls2.gamma tensors
        {"scale_attn_norm"}, {"scale_mlp_norm"},                 // attn.norm / mlp.norm tensors
        {"class_token"}, {"reg_tokens"},                         // agree_timm, against the tensors
        {"no_embed_class"},                                      // pos_embed's row count
        {"pre_norm"}, {"fc_norm"},                               // norm_pre, fc_norm tensors
        // vitreg resamples positions to any input, as timm does with it on; off, timm refuses other sizes.
        {"dynamic_img_size", KeyUse::Inert},
        {"num_classes", KeyUse::Inert},  // the classifier head, which vitreg does not run
        // Training only: dropout, stochastic depth, initialization; where the tensors are built.
        {"drop_rate", KeyUse::Inert}, {"pos_drop_rate", KeyUse::Inert}, {"patch_drop_rate", KeyUse::Inert},
        {"proj_drop_rate", KeyUse::Inert}, {"attn_drop_rate", KeyUse::Inert}, {"drop_path_rate", KeyUse::Inert},
        {"weight_init", KeyUse::Inert}, {"fix_init", KeyUse::Inert}, {"device", KeyUse::Inert}, {"dtype", KeyUse::Inert},
    };
    return keys;
}

// timm's Eva (eva.py): vitreg runs EVA's attention with EVA-02's interleaved RotaryEmbeddingCat
// (temperature 1e4, the grid from 0, 'ij') or none, pre-norm blocks and its own attention-pool heads.
constexpr Runs kEva[] = {
    {"attn_type", R"(["eva"])", "another attention"},
    {"use_post_norm", "[false]", "post-norm blocks"},
    {"rope_type", R"(["cat"])", "another rotary embedding"},
    {"rope_grid_offset", "[0]", "a rotary grid offset"},
    {"rope_grid_indexing", R"(["ij"])", "an 'xy' rotary grid"},
    {"rope_temperature", "[10000]", "another rotary temperature"},
    {"rope_rotate_half", "[false]", "half-rotation rotary pairs"},
    {"use_abs_pos_emb", "[true]", "no learned positions"},
    {"attn_pool_num_heads", "[null]", "an attention pool with its own heads"},
    {"attn_pool_mlp_ratio", "[null]", "an attention pool with its own MLP width"},
    {"norm_layer", R"(["layernorm"])", "RMSNorm"},
    {"dynamic_img_pad", "[false]", "padded inputs"},
    {"global_pool", R"(["token","avg","map"])", "another pooled feature"},
    {"in_chans", "[3]", "an input of other than 3 channels"},
};

// Eva's other parameters (kEva holds the rest), Read as vision_transformer_keys'.
const std::vector<ConfigKey>& eva_keys() {
    static const std::vector<ConfigKey> keys = {
        {"img_size"}, {"patch_size"}, {"embed_dim"}, {"depth"},   // pos_embed's grid, patch_embed, the blocks
        {"num_heads"},                                            // read (timm_heads)
        {"mlp_ratio"}, {"swiglu_mlp"}, {"swiglu_align_to"},       // fc1 or fc1_g/fc1_x and their width
        {"qkv_bias"}, {"qkv_fused"},                              // q_bias/v_bias, qkv or q/k/v_proj tensors
        {"scale_mlp"}, {"scale_attn_inner"},                      // mlp.norm / attn.norm tensors
        {"init_values"},                                          // gamma_1/gamma_2 tensors
        {"class_token"}, {"num_reg_tokens"},                      // agree_timm, against the tensors
        {"no_embed_class"},                                       // pos_embed's row count
        {"use_rot_pos_emb"}, {"ref_feat_shape"},                  // read (eva_positions, the rotary grid)
        {"use_pre_transformer_norm"}, {"use_post_transformer_norm"}, {"use_fc_norm"},  // norm_pre, norm, fc_norm
        // vitreg resamples positions to any input, as timm does with it on; off, timm refuses other sizes.
        {"dynamic_img_size", KeyUse::Inert},
        {"num_classes", KeyUse::Inert}, {"head_init_scale", KeyUse::Inert},  // the classifier head
        // Training only: dropout, stochastic depth; where the tensors are built.
        {"drop_rate", KeyUse::Inert}, {"pos_drop_rate", KeyUse::Inert}, {"patch_drop_rate", KeyUse::Inert},
        {"proj_drop_rate", KeyUse::Inert}, {"attn_drop_rate", KeyUse::Inert}, {"drop_path_rate", KeyUse::Inert},
        {"device", KeyUse::Inert}, {"dtype", KeyUse::Inert},
    };
    return keys;
}

// Every parameter of the class's __init__ with what vitreg does with it: the Runs tables' values
// (refuse_unrun checks them, naming where each comes from) and the Read and Inert lists.
template <size_t N>
std::vector<ConfigKey> with_runs(std::vector<ConfigKey> keys, const Runs (&runs)[N]) {
    for (const Runs& r : runs) {
        const auto values = nlohmann::json::parse(r.values);
        keys.emplace_back(r.key, KeyUse::Runs, std::vector<nlohmann::json>(values.begin(), values.end()));
    }
    return keys;
}

const Row* find_row(const std::string& name) {
    const auto* end = std::end(kRows);
    const auto* it = std::lower_bound(std::begin(kRows), end, name,
                                      [](const Row& r, const std::string& n) { return std::strcmp(r.name, n.c_str()) < 0; });
    return it != end && name == it->name ? it : nullptr;
}

std::string refusal(const std::string& file, const TimmArchitecture& a, const std::string& key, const std::string& why) {
    return file + ": timm architecture '" + a.name + "' sets " + key + " = " + a.arg(key).dump() + " (" + a.origin(key) +
           "): " + why + ", which vitreg does not run";
}

void refuse_unrun(const std::string& file, const TimmArchitecture& a) {
    if (a.model_class == "VisionTransformerDistilled")
        throw ConfigError(file + ": timm architecture '" + a.name +
                          "' is timm's VisionTransformerDistilled (distilled = true in timm's definition): a distillation "
                          "token, which vitreg does not run");
    const auto check = [&](const auto& table) {
        for (const Runs& r : table) {
            if (!a.args.contains(r.key)) continue;
            const auto runs = nlohmann::json::parse(r.values);
            if (std::find(runs.begin(), runs.end(), a.args[r.key]) == runs.end()) throw ConfigError(refusal(file, a, r.key, r.why));
        }
    };
    if (a.model_class == "Eva") check(kEva);
    else check(kVisionTransformer);
    // Unless no_embed_class, timm's _pos_embed adds positions to the registers too (pos_embed holds
    // a row per register); vitreg's registers carry none.
    const auto& registers = a.arg("reg_tokens");
    if (registers.is_number_integer() && registers.get<long>() > 0 && a.arg("no_embed_class") == false)
        throw ConfigError(refusal(file, a, "no_embed_class", "positions for its " + registers.dump() + " register tokens too"));
}

// A model_args key the class's __init__ does not take: timm raises TypeError; vitreg refuses it.
void refuse_unknown(const std::string& file, const TimmArchitecture& a) {
    const std::string cls = a.model_class == "Eva" ? "Eva" : "VisionTransformer";
    std::vector<ConfigKey> known;
    for (const auto& k : timm_parameter_uses(cls)) known.emplace_back(k.key);  // values: refuse_unrun
    check_config_keys(a.model_args, known, file, "model_args.", "timm's " + cls + ".__init__");
}

}  // namespace

const nlohmann::json& TimmArchitecture::arg(const std::string& key) const {
    static const nlohmann::json kNull;
    return args.contains(key) ? args[key] : kNull;
}

std::string TimmArchitecture::origin(const std::string& key) const {
    return stated(key) ? "model_args" : "timm's definition";
}

TimmArchitecture timm_architecture(const nlohmann::json& hub, const std::string& file) {
    const auto& name = hub.at("architecture");
    if (!name.is_string()) throw ConfigError(file + ": 'architecture' is not a string");
    TimmArchitecture a;
    a.name = name.get<std::string>();
    const Row* row = find_row(a.name);
    if (!row)
        throw ConfigError(file + ": architecture '" + a.name +
                          "' is not a ViT that timm's vision_transformer.py, deit.py or eva.py defines "
                          "(vitreg knows timm's models from their definitions: docs/families.md)");
    a.model_class = row->model_class;
    a.args = nlohmann::json::parse(row->args);
    a.model_args = hub.contains("model_args") ? hub["model_args"] : nlohmann::json::object();
    if (!a.model_args.is_object()) throw ConfigError(file + ": 'model_args' is not an object");
    refuse_unknown(file, a);
    for (const auto& [key, value] : a.model_args.items()) a.args[key] = value;
    refuse_unrun(file, a);
    return a;
}

std::vector<std::string> timm_architecture_names() {
    std::vector<std::string> names;
    for (const auto& r : kRows) names.emplace_back(r.name);
    return names;
}

std::vector<ConfigKey> timm_parameter_uses(const std::string& model_class) {
    if (model_class == "Eva") return with_runs(eva_keys(), kEva);
    if (model_class == "VisionTransformer") return with_runs(vision_transformer_keys(), kVisionTransformer);
    throw std::invalid_argument("timm_parameter_uses: no model class '" + model_class + "'");
}

std::vector<std::string> timm_parameters(const std::string& model_class) {
    std::vector<std::string> keys;
    for (const Parameter& p : kParameters)
        if (model_class == p.model_class) keys.emplace_back(p.key);
    return keys;
}

}  // namespace vitreg::source
