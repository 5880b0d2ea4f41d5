#pragma once
// The keys of transformers' config classes for the HF sources (configuration_vit.py,
// configuration_dinov2.py, configuration_dinov2_with_registers.py, configuration_clip.py,
// configuration_siglip.py, configuration_dinov3_vit.py, and configuration_utils.py's
// PreTrainedConfig, whose keys every config.json written by transformers v4 carries), each read, inert or run only at some values
// (config_keys.hpp). tests/test_hf_config.cpp holds these tables to the keys recorded by
// tests/upstream/hf_config_keys.py in tests/fixtures/upstream/transformers_keys.json.
#include <string>
#include <vector>

#include "core/checkpoint/config_keys.hpp"

namespace vitreg::source {

struct SideFiles;

struct HfKeyTable {
    std::string what;                   // how a refusal names the config class
    std::vector<ConfigKey> keys;        // the class's own, then PreTrainedConfig's (own first: they win)
    std::vector<std::string> upstream;  // the fixture's classes whose keys these are
};

// Dinov2Config and Dinov2WithRegistersConfig (one source reads both).
const HfKeyTable& hf_dinov2_keys();
const HfKeyTable& hf_clip_vision_keys();  // CLIPVisionConfig
const HfKeyTable& hf_clip_keys();         // CLIPConfig, a two-tower config.json
const HfKeyTable& hf_siglip_vision_keys();
const HfKeyTable& hf_siglip_keys();
const HfKeyTable& hf_dinov3_keys();
const HfKeyTable& hf_vit_keys();  // ViTConfig
// Every table, for the test against the fixture.
std::vector<const HfKeyTable*> hf_key_tables();

// Refuses a key of config.json that `vision` (or, for a two-tower file's top level, `towers`)
// does not list, or a value not run. A two-tower file's vision_config_dict is held to `vision`.
void check_hf_keys(const SideFiles& side, const HfKeyTable& vision, const HfKeyTable* towers);

}  // namespace vitreg::source
