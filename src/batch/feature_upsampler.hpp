#pragma once
// Feature grids to pixels, one output row at a time, so that a 2048×2048 output of hundreds of
// channels is never held whole (docs/design.md, "Dense features at resolution").
#include <vector>

#include "core/resample.hpp"
#include "vitreg/dense_upsample.hpp"

namespace vitreg {

// Resamples a [grid_h, grid_w, channels] grid to out_h × out_w. Bilinear weighs each output
// pixel's two-by-two neighbour cells as torch does. JBU weighs the cells q within `radius` of
// the pixel's own by exp(-|p - q|² / 2σs²) · exp(-|I(p) - I(q)|² / 2σr²) and divides by the sum:
// p and q in grid cells (cell centres at i + 0.5), I(p) the guide bilinearly resized to the
// output, I(q) that resized again to the grid (the guide at each cell's centre).
class FeatureUpsampler {
public:
    FeatureUpsampler(const float* grid, int grid_h, int grid_w, int channels, int out_h, int out_w,
                     UpsampleMethod method, const GuideImage* guide = nullptr, const JbuOptions& jbu = {});
    // Output row y: [out_w, channels].
    void row(int y, float* out) const;
    int out_h() const { return out_h_; }
    int out_w() const { return out_w_; }

private:
    const float* grid_;
    int grid_h_, grid_w_, channels_, out_h_, out_w_;
    UpsampleMethod method_;
    JbuOptions jbu_;
    ResampleAxis ys_, xs_;  // bilinear
    std::vector<float> guide_out_, guide_grid_;  // [out_h, out_w, 3] and [grid_h, grid_w, 3] (JBU)
};

}  // namespace vitreg
