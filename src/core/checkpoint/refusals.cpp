// What the configs beside the weights may name (docs/design.md, "Families"): anything else is
// refused by its name, never guessed at from the tensor names (a SigLIP folder has CLIP's names).
#include <algorithm>

#include "core/affix.hpp"
#include "core/checkpoint/source.hpp"
#include "core/file_kind.hpp"
#include "vitreg/error.hpp"

namespace vitreg::source {

namespace {

const char* const kRuns =
    "vitreg runs HF model_type dinov2, dinov2_with_registers, dinov3_vit, clip, clip_vision_model, siglip and "
    "siglip_vision_model; timm's vit_*, "
    "deit_*, deit3_*, eva02_* and eva_* architectures; open_clip's own ViT towers";

// The HF source whose config.json names `name` among its model types or architectures.
const Source* hf_source(const std::string& name, std::vector<std::string> Source::*names) {
    for (const auto& s : sources()) {
        const auto& list = s.*names;
        if (std::find(list.begin(), list.end(), name) != list.end()) return &s;
    }
    return nullptr;
}

// timm names the family first; these variants change what the tensors mean (an attention-pool
// head, a distillation token, rotary positions).
std::string unknown_timm_architecture(const std::string& a) {
    if (starts_with(a, "eva02_") || starts_with(a, "eva_")) {
        // eva02_enormous: post-norm blocks (use_post_norm), the same tensor names in another order
        if (contains(a, "enormous")) return "has post-norm blocks (use_post_norm), which vitreg does not run";
        return {};
    }
    const bool family = starts_with(a, "vit_") || starts_with(a, "deit_") || starts_with(a, "deit3_");
    if (!family) return "is not a ViT vitreg runs";
    for (const char* v : {"distilled", "rope"})
        if (a.find(v) != std::string::npos) return "is a " + std::string(v) + " variant, which vitreg does not run";
    return {};
}

}  // namespace

void refuse_unknown_model(const std::string& dir, const Source* matched, int depth_limit) {
    const std::string cfg_file = dir + "/config.json";
    if (is_file(cfg_file)) {
        const nlohmann::json j = read_config_json(cfg_file, depth_limit);
        // HF-named tensors must be the family the config names (a vitreg-converted file beside
        // its HF config.json carries its own metadata and is not held to it).
        const bool hf_names = matched && !matched->hf_model_types.empty();
        const auto check = [&](const std::string& what, const std::string& name, const Source* want) {
            if (!want) throw ConfigError(cfg_file + ": " + what + " '" + name + "' is not a model vitreg runs (" + kRuns + ")");
            if (hf_names && matched != want)
                throw ConfigError(cfg_file + ": " + what + " '" + name + "' does not match the tensors beside it (" +
                                  matched->name + " names)");
        };
        if (const auto* type = dig(j, {"model_type"}); type && type->is_string())
            check("model_type", type->get<std::string>(), hf_source(type->get<std::string>(), &Source::hf_model_types));
        if (const auto* arch = dig(j, {"architectures"}); arch && arch->is_array())
            for (const auto& a : *arch)
                if (a.is_string())
                    check("architectures names", a.get<std::string>(), hf_source(a.get<std::string>(), &Source::hf_architectures));
        if (const auto* a = dig(j, {"architecture"}); a && a->is_string()) {
            const std::string name = a->get<std::string>();
            const std::string why = unknown_timm_architecture(name);
            if (!why.empty()) throw ConfigError(cfg_file + ": timm architecture '" + name + "' " + why + " (" + kRuns + ")");
            // timm's model classes name their tensors apart: the config and the tensors must tell the same class.
            if (matched && matched->timm_class && !matched->timm_class(name))
                throw ConfigError(cfg_file + ": timm architecture '" + name + "' does not match the tensors beside it (" +
                                  matched->timm_names + ")");
        }
    }
    const std::string clip_file = dir + "/open_clip_config.json";
    if (is_file(clip_file)) {
        const nlohmann::json j = read_config_json(clip_file, depth_limit);
        if (const auto* t = dig(j, {"model_cfg", "vision_cfg", "timm_model_name"}); t && t->is_string() && !t->get<std::string>().empty())
            throw ConfigError(clip_file + ": the vision tower is timm's '" + t->get<std::string>() +
                              "', not open_clip's own ViT (" + kRuns + ")");
    }
}

}  // namespace vitreg::source
