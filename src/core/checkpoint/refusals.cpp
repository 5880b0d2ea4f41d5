// What the configs beside the weights may name (docs/design.md, "Families"): anything else is
// refused by its name, never guessed at from the tensor names (a SigLIP folder has CLIP's names).
#include <algorithm>

#include "core/checkpoint/source.hpp"
#include "core/checkpoint/timm_architectures.hpp"
#include "core/file_kind.hpp"
#include "vitreg/error.hpp"

namespace vitreg::source {

namespace {

const char* const kRuns =
    "vitreg runs HF model_type vit, dinov2, dinov2_with_registers, dinov3_vit, clip, clip_vision_model, siglip and "
    "siglip_vision_model; the timm architectures of docs/families.md; open_clip's own ViT towers";

// The HF source whose config.json names `name` among its model types or architectures.
const Source* hf_source(const std::string& name, std::vector<std::string> Source::*names) {
    for (const auto& s : sources()) {
        const auto& list = s.*names;
        if (std::find(list.begin(), list.end(), name) != list.end()) return &s;
    }
    return nullptr;
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
        if (j.contains("architecture")) {
            // timm's definitions tell what the name builds (refused: a name they do not define, an
            // argument vitreg does not run); its model classes name their tensors apart.
            const TimmArchitecture a = timm_architecture(j, cfg_file);
            if (matched && !matched->timm_class.empty() && matched->timm_class != a.model_class)
                throw ConfigError(cfg_file + ": timm architecture '" + a.name + "' (timm's " + a.model_class +
                                  ") does not match the tensors beside it (" + matched->timm_names + ")");
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
