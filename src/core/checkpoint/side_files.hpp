#pragma once
// The configs that lie beside the weights: HF's config.json (a two-tower model's vision_config),
// OpenCLIP's open_clip_config.json, an HF-hub timm repo's config.json (architecture,
// pretrained_cfg) and HF's preprocessor_config.json. Read once, with the file named on error.
#include <array>
#include <initializer_list>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/checkpoint/timm_architectures.hpp"
#include "vitreg/config.hpp"

namespace vitreg::source {

// Which configs a source reads.
enum class SideFormat {
    HfConfig,        // config.json, required
    HfTowerConfig,   // config.json, required; its vision_config when it has one (a two-tower model)
    OpenClipConfig,  // open_clip_config.json, when present
    TimmHubConfig,   // config.json, when present and a timm one (architecture or pretrained_cfg)
};

struct SideFiles {
    std::string cfg_file;           // <dir>/config.json (named in errors even when absent)
    nlohmann::json cfg;             // HF's config.json (a two-tower model's vision_config), or null
    nlohmann::json top;             // a two-tower model's whole config.json, or null
    std::string open_clip_file;
    nlohmann::json open_clip;       // or null
    nlohmann::json timm;            // an HF-hub timm repo's config.json, or null
    std::string preprocessor_file;
    nlohmann::json preprocessor;    // or null
    std::string architecture;       // timm's architecture, or ""
    std::optional<TimmArchitecture> timm_model;  // what it builds, model_args applied (when named)

    const nlohmann::json* vision_cfg() const;  // open_clip's model_cfg.vision_cfg
    const nlohmann::json* pretrained() const;  // timm's pretrained_cfg
    std::optional<long> vision_count(const char* key) const;  // a positive count in vision_cfg
    // HF config.json values (nullopt when absent or null).
    std::optional<long> cfg_int(const std::string& key) const;
    std::optional<double> cfg_float(const std::string& key) const;
    std::optional<std::string> cfg_str(const std::string& key) const;
    std::optional<bool> cfg_bool(const std::string& key) const;
    // An argument of the timm architecture (model_args over timm's definition), or null.
    const nlohmann::json* timm_arg(const std::string& key) const;
};

struct Source;
class Notes;
// Throws ConfigError for a config that is missing, unreadable or not what the source expects.
SideFiles read_side_files(const Source& source, const std::string& dir, const std::string& weights_file, int depth_limit);
// What they state over the defaults: heads, the rotary grid and base, the pool, the activation
// (the source's reading), eps and the eval transform.
// `activation_stated`: the file's metadata names the activation, so the source's configs are not
// asked for it (nor checked, nor noted).
void apply_side_files(const Source& source, const SideFiles& side, Config& c, Notes& notes, bool activation_stated);

// HF config.json's hidden_act, an ACT2FN name in transformers: gelu (exact), quick_gelu, and
// gelu_pytorch_tanh or gelu_new (GELU's tanh form). `fallback` where the config leaves it out (the
// config class's default). Any other name is refused with the file, the key and the value.
MlpKind hf_activation(const SideFiles& side, const std::string& fallback);

// The defaults of HF's squashing image processors (DINOv3's, ViT's): both sides to the native
// input, bilinear, nothing cropped.
void hf_bilinear_squash(Config& c);

// Reading JSON configs.
nlohmann::json read_config_json(const std::string& path, int max_depth);
// A value at `path` in a JSON object, or null when any step is missing.
const nlohmann::json* dig(const nlohmann::json& j, std::initializer_list<const char*> path);
long json_count(const nlohmann::json& v, const std::string& file, const std::string& key);
double json_number(const nlohmann::json& v, const std::string& file, const std::string& key);
std::array<float, 3> json_triple(const nlohmann::json& v, const std::string& file, const std::string& key);

}  // namespace vitreg::source
