#pragma once
// From a decoded image to the model's input tensor: resize / crop per a ResizeSpec, scale
// to [0, 1] and normalize with the checkpoint's mean and std.
#include <array>
#include <string>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/image.hpp"

namespace vitreg {

struct ResizeSpec {
    enum class Mode {
        Eval,   // shortest edge to eval_resize (bicubic), center crop eval_crop: the model's eval
                // transform (DINOv2 / HF: 256 -> 224; timm: input / crop_pct -> input; CLIP: 224 -> 224)
        None,   // keep the pixels, crop right/bottom to a multiple of the patch
        Exact,  // resize to width × height (both multiples of the patch)
        Short,  // shortest edge to `size`, then both sides down to multiples of the patch
        Long,   // longest edge to `size`, then both sides down to multiples of the patch
    };
    Mode mode = Mode::Eval;
    int size = 0;
    int width = 0, height = 0;
    int eval_resize = 256, eval_crop = 224;  // Eval's two sides (see Config::eval_resize)

    // "eval" | "none" | "WxH" | "short:N" | "long:N"; throws UsageError.
    static ResizeSpec parse(const std::string& text);
    std::string to_string() const;
    // This spec with Eval following the model's transform (Config input_size and crop_pct).
    ResizeSpec for_model(const Config& config) const;
};

// A preprocessed image: float32 [3, height, width], normalized.
struct Pixels {
    int width = 0;
    int height = 0;
    std::vector<float> chw;
};

// Where the model input sits in the source image (for mapping patches back to pixels).
struct Geometry {
    int source_width = 0, source_height = 0;
    int resized_width = 0, resized_height = 0;  // after resizing, before cropping
    int crop_left = 0, crop_top = 0;
    int width = 0, height = 0;  // model input
};

// The largest image a resize may produce before cropping (2^24 pixels: ~200 MB as float RGB; the
// eval transform of a 256:1 panorama still fits).
constexpr long long kMaxResizedPixels = 1ll << 24;

// Computes where `spec` puts an image of this size; throws ImageError naming `name` when
// the result would be empty, not a multiple of the patch, or over kMaxResizedPixels.
Geometry plan_geometry(int source_width, int source_height, const ResizeSpec& spec, int patch, const std::string& name);

Pixels preprocess(const Image& image, const ResizeSpec& spec, int patch, const std::array<float, 3>& mean,
                  const std::array<float, 3>& std, const std::string& name = "image", Geometry* geometry = nullptr);
// For a model: its patch, mean and std, and its eval transform (spec.for_model(config)).
Pixels preprocess(const Image& image, const ResizeSpec& spec, const Config& config, const std::string& name = "image",
                  Geometry* geometry = nullptr);

}  // namespace vitreg
