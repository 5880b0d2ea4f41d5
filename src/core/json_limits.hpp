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

}  // namespace vitreg
