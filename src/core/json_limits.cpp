#include "json_limits.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "vitreg/error.hpp"

namespace vitreg {

nlohmann::json parse_json_bounded(std::string_view text, int max_depth) {
    auto guard = [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > max_depth)
            throw std::runtime_error("nesting deeper than " + std::to_string(max_depth) + " levels");
        return true;
    };
    return nlohmann::json::parse(text.begin(), text.end(), guard);
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path + ": cannot read the " + what);
    std::ostringstream text;
    text << in.rdbuf();
    try {
        return parse_json_bounded(text.str());
    } catch (const std::exception& e) {
        throw IoError(path + ": not a vitreg " + what + ": malformed JSON: " + e.what());
    }
}

nlohmann::json read_format_file(const std::string& path, const std::string& format, int version, const std::string& what,
                                const std::string& maker) {
    const nlohmann::json j = read_json_file(path, what);
    const auto fail = [&](const std::string& why) { return IoError(path + ": not a vitreg " + what + ": " + why); };
    if (!j.is_object() || !j.contains("format") || j["format"] != format)
        throw fail("\"format\" is not \"" + format + "\" (make one with " + maker + ")");
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != version)
        throw fail("unsupported \"version\" (this vitreg reads version " + std::to_string(version) + ")");
    return j;
}

}  // namespace vitreg
