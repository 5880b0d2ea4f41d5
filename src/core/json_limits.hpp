#pragma once
// JSON parsing for untrusted files (safetensors headers, config.json): nesting depth is
// bounded so a hostile document cannot exhaust the stack.
#include <nlohmann/json.hpp>
#include <string_view>

namespace vitreg {

constexpr int kMaxJsonDepth = 64;

// Throws std::exception (nlohmann's parse_error or std::runtime_error) on malformed or too
// deeply nested input; callers add the file name.
nlohmann::json parse_json_bounded(std::string_view text, int max_depth = kMaxJsonDepth);

// A whole JSON file, parsed with the depth bound. Throws IoError "PATH: cannot read the WHAT" or
// "PATH: not a vitreg WHAT: malformed JSON: ...".
nlohmann::json read_json_file(const std::string& path, const std::string& what);

// One of vitreg's own JSON files ({"format": FORMAT, "version": VERSION, ...}), read whole and
// checked for its format and version. Throws IoError "PATH: not a vitreg WHAT: ..." where
// `maker` says which command makes one.
nlohmann::json read_format_file(const std::string& path, const std::string& format, int version, const std::string& what,
                                const std::string& maker);

}  // namespace vitreg
