#pragma once
// The per-format decoders behind decode_image (image.cpp picks one by the file's signature).
// Each gives what PIL's `Image.open(f).convert("RGB")` gives for the same bytes (docs/design.md,
// "Pixel pipelines"), checks the pixel count against the limits before it allocates any pixel,
// bounds its memory, and throws ImageError("<name>: <fault>") for anything it cannot decode whole.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "vitreg/image.hpp"

namespace vitreg {

bool is_jpeg(const std::uint8_t* data, std::size_t size);
bool is_webp(const std::uint8_t* data, std::size_t size);

// Throws ImageError naming `name` when w x h is over limits.max_pixels (divided, not multiplied:
// a header may declare 2^32 - 1 on each side).
void check_pixel_count(std::int64_t w, std::int64_t h, const std::string& name, const ImageLimits& limits);

using DraftTarget = std::function<std::pair<int, int>(int width, int height)>;
// PIL's Image.draft scale for a file of width x height asked for want_width x want_height:
// min(width / want_width, height / want_height) snapped down to 8, 4, 2 or 1.
int draft_scale(int width, int height, int want_width, int want_height);
// libjpeg-turbo with PIL's settings: ISLOW IDCT, fancy upsampling, block smoothing; CMYK / YCCK
// to RGB as PIL converts its inverted CMYK. With `draft`, decoded at draft_scale's 1/s (libjpeg's
// scale_denom, all PIL's draft changes). `keep_native`: a CMYK file's ink bands too (Image::native).
Image decode_jpeg(const std::uint8_t* data, std::size_t size, const std::string& name, const ImageLimits& limits,
                  const DraftTarget& draft = {}, bool keep_native = false);
// The first frame of a WebP file (still or animated, lossy or lossless), alpha dropped: what
// PIL 9.4's WebP plugin (libwebp's WebPAnimDecoder, RGBA) and convert("RGB") give.
// `keep_native`: a file with alpha also as RGBA (Image::native).
Image decode_webp(const std::uint8_t* data, std::size_t size, const std::string& name, const ImageLimits& limits,
                  bool keep_native = false);

// The EXIF Orientation tag (0x0112) of a JPEG (APP1 "Exif"), PNG (eXIf chunk) or WebP (EXIF
// chunk): 1..8, or 1 when there is none or it cannot be read. Never throws, never reads past
// `size`.
int exif_orientation(const std::uint8_t* data, std::size_t size);
// Transposes the pixels as PIL's ImageOps.exif_transpose does for that orientation.
void apply_exif_orientation(Image& image, int orientation);

}  // namespace vitreg
