#pragma once
// The resampling filters of PIL's Image.resize, by the names configurations and the command
// line give them. Here, beside Config, so that reading a configuration needs no image code.
#include <string>

#include "vitreg/enum_names.hpp"

namespace vitreg {

enum class ResizeFilter { Nearest, Box, Bilinear, Hamming, Bicubic, Lanczos };

template <>
struct EnumTable<ResizeFilter> {
    static constexpr const char* what = "resize filter";
    static constexpr EnumName<ResizeFilter> names[] = {
        {ResizeFilter::Nearest, "nearest"}, {ResizeFilter::Box, "box"},         {ResizeFilter::Bilinear, "bilinear"},
        {ResizeFilter::Hamming, "hamming"}, {ResizeFilter::Bicubic, "bicubic"}, {ResizeFilter::Lanczos, "lanczos"}};
};

std::string to_string(ResizeFilter f);
// "nearest" | "box" | "bilinear" | "hamming" | "bicubic" | "lanczos"; throws UsageError.
ResizeFilter parse_resize_filter(const std::string& s);

}  // namespace vitreg
