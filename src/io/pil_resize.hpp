#pragma once
// PIL's Image.resize on 8-bit images, bit for bit (Pillow 9.4, src/libImaging/Resample.c;
// docs/design.md, "Pixel pipelines"): per-output-index filter weights with the antialias widening,
// 22-bit fixed point, the horizontal pass first into an 8-bit intermediate, a pass skipped when its
// axis keeps its size; NEAREST as PIL's affine scaling. What torchvision, timm, HF's slow
// processors and open_clip run on PIL images.
#include <cstdint>
#include <vector>

#include "vitreg/resize_filter.hpp"

namespace vitreg {

// An 8-bit interleaved image of 1 to 4 bands.
struct Bands {
    int width = 0, height = 0, bands = 3;
    std::vector<std::uint8_t> data;  // [height, width, bands]
};

// Bands read in place (a decoded image's pixels, without a copy).
struct BandsView {
    const std::uint8_t* data = nullptr;
    int width = 0, height = 0, bands = 3;
    BandsView(const std::uint8_t* d, int w, int h, int b) : data(d), width(w), height(h), bands(b) {}
    BandsView(const Bands& b) : data(b.data.data()), width(b.width), height(b.height), bands(b.bands) {}  // NOLINT: implicit on purpose
};

// The part of PIL's out_width x out_height result that a crop keeps: columns [left, left + width),
// rows [top, top + height). Only those are computed; their bytes are those of the whole resize.
struct ResizeWindow {
    int left = 0, top = 0, width = 0, height = 0;
};

// PIL's `image.resize((out_width, out_height), filter)` restricted to `window` (the whole result
// when window.width == 0). Bands are resized independently, as PIL does for L, RGB and CMYK (the
// caller premultiplies alpha, as PIL does for RGBA and LA).
Bands pil_resize(const BandsView& in, int out_width, int out_height, ResizeFilter filter, ResizeWindow window = {});
// The same for a 32-bit integer grey image (PIL's mode I, a 16-bit PNG's): double weights and
// sums, rounded half away from zero, not clipped.
std::vector<std::int32_t> pil_resize_grey32(const std::vector<std::int32_t>& in, int width, int height, int out_width,
                                            int out_height, ResizeFilter filter, ResizeWindow window = {});

}  // namespace vitreg
