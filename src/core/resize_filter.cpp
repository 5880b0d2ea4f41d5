#include "vitreg/resize_filter.hpp"

#include "vitreg/error.hpp"

namespace vitreg {

std::string to_string(ResizeFilter f) { return name_of(f); }

// (no "expected" in this message: the pixel options' tests read it as it has always been)
ResizeFilter parse_resize_filter(const std::string& s) {
    if (auto f = find_enum<ResizeFilter>(s)) return *f;
    throw UsageError("unknown resize filter '" + s + "' (" + enum_choices<ResizeFilter>() + ")");
}

}  // namespace vitreg
