#include "vitreg/resize_filter.hpp"

#include "vitreg/error.hpp"

namespace vitreg {

std::string to_string(ResizeFilter f) {
    switch (f) {
        case ResizeFilter::Nearest: return "nearest";
        case ResizeFilter::Box: return "box";
        case ResizeFilter::Bilinear: return "bilinear";
        case ResizeFilter::Hamming: return "hamming";
        case ResizeFilter::Bicubic: return "bicubic";
        case ResizeFilter::Lanczos: return "lanczos";
    }
    return "?";
}

ResizeFilter parse_resize_filter(const std::string& s) {
    for (auto f : {ResizeFilter::Nearest, ResizeFilter::Box, ResizeFilter::Bilinear, ResizeFilter::Hamming,
                   ResizeFilter::Bicubic, ResizeFilter::Lanczos})
        if (s == to_string(f)) return f;
    throw UsageError("unknown resize filter '" + s + "' (nearest, box, bilinear, hamming, bicubic or lanczos)");
}

}  // namespace vitreg
