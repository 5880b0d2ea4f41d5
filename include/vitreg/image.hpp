#pragma once
// Decoding image files to 8-bit RGB as PIL's `Image.open(f).convert("RGB")` does (docs/design.md,
// "Pixel pipelines"): JPEG through libjpeg-turbo with PIL's settings, WebP through libwebp, PNG,
// BMP, PNM, TGA and GIF's first frame through stb_image with PIL's conversions. Pixel count is
// checked before any pixel is allocated.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace vitreg {

struct Image {
    int width = 0;
    int height = 0;
    std::vector<std::uint8_t> rgb;  // [height, width, 3]
    // What the file held, in PIL's names: "RGB", "L", "RGBA", "LA", "P", "CMYK", "I" (16-bit grey), "1".
    std::string mode = "RGB";
    // > 1 when a JPEG was decoded at a reduced DCT scale (DecodeOptions::draft): the file's own
    // sides are about this many times these.
    int draft_scale = 1;
    // PIL's own bands, kept when asked (DecodeOptions::keep_native) for the modes whose resize
    // PIL runs on them rather than on RGB (open_clip resizes before it converts):
    // RGBA (4 bands) and LA (2), colour then alpha; CMYK (4), ink amounts; empty otherwise.
    std::vector<std::uint8_t> native;
    int native_bands = 0;
    std::vector<std::int32_t> grey32;  // mode "I": the 16-bit grey values, unclipped
};

struct ImageLimits {
    std::int64_t max_pixels = 178956970;  // PIL's decompression-bomb bound (2^31 / 4 / 3)
    std::int64_t max_file_bytes = 1ll << 30;
};

struct DecodeOptions {
    ImageLimits limits;
    // Apply the EXIF orientation as PIL's ImageOps.exif_transpose (HF's load_image does; PIL's
    // Image.open, torchvision's and timm's loaders do not).
    bool exif_transpose = false;
    // JPEG only: given the file's sides, the size the caller will resize to; the file is then
    // decoded at the reduced DCT scale PIL's Image.draft picks for it (1/2, 1/4, 1/8). Empty:
    // full size, the exact pixels.
    std::function<std::pair<int, int>(int width, int height)> draft;
    // Also keep Image::native / grey32 (open_clip's pipeline needs them).
    bool keep_native = false;
};

// Throws ImageError("<path>: <fault>") for unreadable, empty, truncated, unsupported or
// oversized files.
Image decode_image(const std::string& path, const DecodeOptions& options);
Image decode_image(const std::string& path, const ImageLimits& limits = {});
Image decode_image_memory(const std::uint8_t* data, std::size_t size, const std::string& name,
                          const DecodeOptions& options);
Image decode_image_memory(const std::uint8_t* data, std::size_t size, const std::string& name,
                          const ImageLimits& limits = {});

}  // namespace vitreg
