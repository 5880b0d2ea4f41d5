#pragma once
// Strict parsing of user text (CLI specs, metadata strings): whole-string numbers and lists.
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

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

// The finite real number `text` spells, if it is one (no trailing junk) within [lo, hi].
inline std::optional<double> parse_real(const std::string& text, double lo, double hi) {
    if (text.empty() || text[0] == ' ') return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || errno || !(v >= lo && v <= hi)) return std::nullopt;
    return v;
}

// The pieces of `text` between `sep`s: "a,,b" → {"a", "", "b"}, "" → {""}.
inline std::vector<std::string> split(const std::string& text, char sep) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t at = text.find(sep); at != std::string::npos; at = text.find(sep, start)) {
        parts.push_back(text.substr(start, at - start));
        start = at + 1;
    }
    parts.push_back(text.substr(start));
    return parts;
}

}  // namespace vitreg
