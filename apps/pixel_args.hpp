#pragma once
// How image files become pixels, the same options in vitreg and vitreg-viewer: --resize, and the
// pipeline choices of docs/design.md, "Pixel pipelines"; the table is pixel_option_table().
#include <CLI/CLI.hpp>
#include <string>

#include "option_args.hpp"
#include "vitreg/pixel_options.hpp"

namespace vitreg::cli {

struct PixelArgs {
    ResizeSpec defaults;  // the command's own (--resize long:448 for the evaluations)
    GivenOptions given;
};

// `resize_help`: another help for --resize where the command gives it a role of its own ("": the table's).
inline void add_pixel_args(CLI::App& cmd, PixelArgs& a, const std::string& resize_help = "") {
    add_table_options(cmd, pixel_option_table(), a.defaults, a.given);
    if (!resize_help.empty()) cmd.get_option("--resize")->description(resize_help);
}

inline ResizeSpec pixel_spec(const PixelArgs& a) {
    ResizeSpec r = a.defaults;
    apply_given(pixel_option_table(), a.given, r);
    return r;
}

}  // namespace vitreg::cli
