#pragma once
// The resampling filters of PIL's Image.resize, by the names configurations and the command
// line give them. Here, beside Config, so that reading a configuration needs no image code.
#include <string>

namespace vitreg {

enum class ResizeFilter { Nearest, Box, Bilinear, Hamming, Bicubic, Lanczos };

std::string to_string(ResizeFilter f);
// "nearest" | "box" | "bilinear" | "hamming" | "bicubic" | "lanczos"; throws UsageError.
ResizeFilter parse_resize_filter(const std::string& s);

}  // namespace vitreg
