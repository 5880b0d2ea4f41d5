#pragma once
// How image files become pixels, the same options in vitreg and vitreg-viewer: --resize, and the
// pipeline choices of docs/design.md, "Pixel pipelines".
#include <CLI/CLI.hpp>
#include <string>

#include "vitreg/preprocess.hpp"

namespace vitreg::cli {

struct PixelArgs {
    std::string resize = "eval", pipeline, resample = "pil", decode = "exact";
    bool exif_transpose = false;
};

inline void add_pixel_args(CLI::App& cmd, PixelArgs& a,
                           const std::string& resize_help = "eval | none | WxH | short:N | long:N") {
    cmd.add_option("--resize", a.resize, resize_help)->capture_default_str();
    cmd.add_option("--pipeline", a.pipeline,
                   "whose eval transform: " + enum_choices<PixelPipeline>(" | ", " | ") + " (default: the checkpoint's own)")
        ->check(CLI::IsMember(enum_names<PixelPipeline>()));
    cmd.add_option("--resample", a.resample,
                   "pil: PIL's uint8 Image.resize, as PIL-image pipelines do; torch: F.interpolate's float "
                   "bicubic antialias, as pipelines that resize tensors do")
        ->check(CLI::IsMember({"pil", "torch"}))
        ->capture_default_str();
    cmd.add_option("--decode", a.decode,
                   "exact: PIL's pixels; draft: JPEGs at a reduced DCT scale when much larger than the resize "
                   "(PIL's Image.draft: faster on camera photos, different pixels)")
        ->check(CLI::IsMember({"exact", "draft"}))
        ->capture_default_str();
    cmd.add_flag("--exif-transpose", a.exif_transpose,
                 "apply the EXIF orientation first, as HF's load_image does (PIL's Image.open, torchvision and timm "
                 "do not)");
}

inline ResizeSpec pixel_spec(const PixelArgs& a) {
    ResizeSpec r = ResizeSpec::parse(a.resize);
    if (!a.pipeline.empty()) r.pipeline = parse_pixel_pipeline(a.pipeline);
    r.resampler = parse_resampler(a.resample);
    r.draft = a.decode == "draft";
    r.exif_transpose = a.exif_transpose;
    return r;
}

}  // namespace vitreg::cli
