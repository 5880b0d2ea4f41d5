#include "core/checkpoint/config_keys.hpp"

#include <algorithm>

#include "vitreg/error.hpp"

namespace vitreg::source {

std::string quoted_value(const nlohmann::json& v) {
    std::string s = v.dump();
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
}

void check_config_keys(const nlohmann::json& object, const std::vector<ConfigKey>& keys, const std::string& file,
                       const std::string& where, const std::string& what) {
    if (!object.is_object()) return;
    for (const auto& item : object.items()) {
        const std::string& name = item.key();
        const nlohmann::json& value = item.value();
        const auto rule = std::find_if(keys.begin(), keys.end(), [&](const ConfigKey& k) { return k.key == name; });
        const std::string said = file + ": " + where + name + " = " + quoted_value(value);
        if (rule == keys.end())
            throw ConfigError(said + ": '" + name + "' is not a key " + what + " has; vitreg refuses a setting it cannot read");
        if (rule->use != KeyUse::Runs || std::find(rule->runs.begin(), rule->runs.end(), value) != rule->runs.end()) continue;
        std::string runs;
        for (const auto& v : rule->runs) runs += (runs.empty() ? "" : ", ") + quoted_value(v);
        throw ConfigError(said + " is not a setting vitreg runs (it runs " + runs + ")");
    }
}

}  // namespace vitreg::source
