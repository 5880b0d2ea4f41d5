#pragma once
// Strict whole-string integer parsing for user text (CLI specs, metadata strings).
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

namespace vitreg {

// The integer `text` spells, if it is one (no sign tricks, no trailing junk) within [lo, hi].
inline std::optional<long> parse_integer(const std::string& text, long lo, long hi) {
    if (text.empty() || text[0] == ' ' || text[0] == '+') return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (*end != '\0' || errno || v < lo || v > hi) return std::nullopt;
    return v;
}

}  // namespace vitreg
