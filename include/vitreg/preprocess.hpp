#pragma once
// From an image file to the model's input tensor, as the user's PyTorch pipeline makes it
// (docs/design.md, "Pixel pipelines"): decode as PIL does, resize and crop with PIL's Image.resize
// by the rules of the checkpoint's own pipeline (or a named one), then ToTensor and Normalize in
// float32.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/image.hpp"

namespace vitreg {

// How images are resampled: PIL's uint8 resize (what every PIL-image pipeline runs), or the
// float antialiased bicubic of torch.nn.functional.interpolate (pipelines that resize tensors).
enum class Resampler { Pil, Torch };
std::string to_string(Resampler r);
Resampler parse_resampler(const std::string& s);  // "pil" | "torch"; throws UsageError

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
    bool eval_squash = false;                // Eval squashes to eval_resize, then crops eval_crop (Config::eval_squash)
    // Whose rules (unset: the checkpoint's own, resolved by for_model), with which filter.
    std::optional<PixelPipeline> pipeline;
    ResizeFilter filter = ResizeFilter::Bicubic;
    Resampler resampler = Resampler::Pil;
    bool draft = false;           // --decode draft: JPEGs at a reduced DCT scale (changes pixels)
    bool exif_transpose = false;  // --exif-transpose: apply the EXIF orientation first

    // "eval" | "none" | "WxH" | "short:N" | "long:N"; throws UsageError. The other fields keep
    // their defaults.
    static ResizeSpec parse(const std::string& text);
    // The geometry ("eval", "224x224", ...), then each choice that is not the default (the job
    // identity: any of them changes the pixels).
    std::string to_string() const;
    // This spec with Eval following the model's transform (Config input_size and crop_pct), and
    // the model's pipeline and filter unless one was named.
    ResizeSpec for_model(const Config& config) const;
    PixelPipeline pipeline_or_default() const { return pipeline.value_or(PixelPipeline::Torchvision); }
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

// The resized and cropped image, uint8 RGB, as the pipeline hands it to ToTensor (PIL resampling).
Image resize_and_crop(const Image& image, const ResizeSpec& spec, const Geometry& geometry);
// torchvision's ToTensor + Normalize in float32: (v / 255 - mean) / std, each step rounded.
Pixels normalize(const Image& image, const std::array<float, 3>& mean, const std::array<float, 3>& std);

// What decode_image needs for this spec: the limits, the EXIF choice, and for --decode draft the
// size this spec resizes each file to.
DecodeOptions decode_options(const ResizeSpec& spec, int patch, const ImageLimits& limits, const std::string& name);

Pixels preprocess(const Image& image, const ResizeSpec& spec, int patch, const std::array<float, 3>& mean,
                  const std::array<float, 3>& std, const std::string& name = "image", Geometry* geometry = nullptr);
// For a model: its patch, mean and std, and its eval transform (spec.for_model(config)).
Pixels preprocess(const Image& image, const ResizeSpec& spec, const Config& config, const std::string& name = "image",
                  Geometry* geometry = nullptr);
// decode_image + preprocess for a model: the one way every command turns a file into pixels.
Pixels load_pixels(const std::string& path, const ResizeSpec& spec, const Config& config, const ImageLimits& limits,
                   Geometry* geometry = nullptr);
// The same for a file's bytes already in memory (an upload); `name` is what errors call it.
Pixels load_pixels(const std::uint8_t* data, std::size_t size, const std::string& name, const ResizeSpec& spec,
                   const Config& config, const ImageLimits& limits);

}  // namespace vitreg
