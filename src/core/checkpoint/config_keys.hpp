#pragma once
// What a source does with each key of a config beside its weights: reads it, knows it changes
// nothing at inference, or runs only some of its values. A key outside the list is refused by
// name, as the upstream constructors refuse it (open_clip's config dataclasses raise TypeError),
// so that a setting added upstream later is heard of, not ignored.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vitreg::source {

enum class KeyUse {
    Read,   // the source reads it (or checks it against the tensors)
    Inert,  // it changes nothing at inference (training, another tower, the classifier head)
    Runs,   // vitreg runs only the values listed; any other is refused with its value
};

struct ConfigKey {
    ConfigKey(std::string key_, KeyUse use_ = KeyUse::Read, std::vector<nlohmann::json> runs_ = {})
        : key(std::move(key_)), use(use_), runs(std::move(runs_)) {}
    std::string key;
    KeyUse use;
    std::vector<nlohmann::json> runs;  // KeyUse::Runs: the values vitreg runs (JSON null stands for absent)
};

// Refuses (ConfigError naming `file`, `where` + the key, and the value) a key of `object` that
// `keys` does not list, or a KeyUse::Runs key holding a value vitreg does not run. `what` names
// the config in the message ("open_clip's vision_cfg").
void check_config_keys(const nlohmann::json& object, const std::vector<ConfigKey>& keys, const std::string& file,
                       const std::string& where, const std::string& what);

// A JSON value as a refusal quotes it (short: long values are cut).
std::string quoted_value(const nlohmann::json& v);

}  // namespace vitreg::source
