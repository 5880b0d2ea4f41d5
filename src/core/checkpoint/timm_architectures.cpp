// Looks a timm hub config's `architecture` up in timm's definitions and refuses what vitreg's
// forward does not run, by the argument's name and value.
#include "core/checkpoint/timm_architectures.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "vitreg/error.hpp"

namespace vitreg::source {

namespace {

struct Row {
    const char* name;
    const char* model_class;
    const char* args;  // JSON
};

constexpr Row kRows[] = {
#include "core/checkpoint/timm_architectures.inc"
};

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
};

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
};

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
    for (const auto& [key, value] : a.model_args.items()) a.args[key] = value;
    refuse_unrun(file, a);
    return a;
}

std::vector<std::string> timm_architecture_names() {
    std::vector<std::string> names;
    for (const auto& r : kRows) names.emplace_back(r.name);
    return names;
}

}  // namespace vitreg::source
