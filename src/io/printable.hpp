#pragma once
// A name read from an untrusted file, fit for an error message: every byte outside printable
// ASCII becomes '?', and a name longer than `limit` is cut there and ends in "...".
#include <cstddef>
#include <string>

namespace vitreg {

inline std::string printable(const std::string& s, std::size_t limit = 200) {
    std::string out;
    for (const char c : s.substr(0, limit)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    return out + (s.size() > limit ? "..." : "");
}

}  // namespace vitreg
