#pragma once
// Text the pictures and the pages share.
#include <cstdio>
#include <string>

namespace vitreg::render {

// One number through a printf format ("%.2f").
inline std::string fmt(const char* format, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

// A table's cell for a value that does not apply.
inline constexpr const char* kDash = "\u2014";

}  // namespace vitreg::render
