#pragma once
// Decoding image files to 8-bit RGB, whatever they hold (grayscale, RGBA, 16-bit PNG, JPEG,
// BMP, PNM, TGA, GIF's first frame). Pixel count is checked before any pixel is allocated.
#include <cstdint>
#include <string>
#include <vector>

namespace vitreg {

struct Image {
    int width = 0;
    int height = 0;
    std::vector<std::uint8_t> rgb;  // [height, width, 3]
};

struct ImageLimits {
    std::int64_t max_pixels = 178956970;  // PIL's decompression-bomb bound (2^31 / 4 / 3)
    std::int64_t max_file_bytes = 1ll << 30;
};

// Throws ImageError("<path>: <fault>") for unreadable, empty, truncated, unsupported or
// oversized files.
Image decode_image(const std::string& path, const ImageLimits& limits = {});
Image decode_image_memory(const std::uint8_t* data, std::size_t size, const std::string& name,
                          const ImageLimits& limits = {});

}  // namespace vitreg
