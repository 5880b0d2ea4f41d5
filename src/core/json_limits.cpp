#include "json_limits.hpp"

#include <stdexcept>
#include <string>

namespace vitreg {

nlohmann::json parse_json_bounded(std::string_view text, int max_depth) {
    auto guard = [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > max_depth)
            throw std::runtime_error("nesting deeper than " + std::to_string(max_depth) + " levels");
        return true;
    };
    return nlohmann::json::parse(text.begin(), text.end(), guard);
}

}  // namespace vitreg
