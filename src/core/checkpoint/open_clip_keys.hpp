#pragma once
// The keys of open_clip's configs (src/open_clip/model.py: CLIPVisionCfg's fields, the CLIP
// constructors' arguments), each read, inert or run only at some values (config_keys.hpp).
// tests/test_upstream.cpp holds these lists to the keys of the open_clip commit the parity
// fixtures came from.
#include <vector>

#include "core/checkpoint/config_keys.hpp"

namespace vitreg::source {

const std::vector<ConfigKey>& open_clip_vision_keys();  // model_cfg.vision_cfg
const std::vector<ConfigKey>& open_clip_model_keys();   // model_cfg

}  // namespace vitreg::source
