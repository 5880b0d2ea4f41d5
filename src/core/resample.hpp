#pragma once
// Separable bicubic resampling of channels-last grids ([H, W, C] float32), with the exact
// index and weight rules of PyTorch's interpolate, so that position embeddings and images
// resample the way the reference does (docs/design.md, "Reference semantics").
#include <vector>

namespace vitreg {

// One output index: weights over input indices (taps already clamped to the input).
struct ResampleTaps {
    std::vector<int> index;
    std::vector<float> weight;
};
using ResampleAxis = std::vector<ResampleTaps>;  // one entry per output index

// bicubic, align_corners=False, antialias=False, A = -0.75, taps clamped to [0, in-1].
// `src_per_dst` is the coordinate scale: in/out for a size, 1/scale_factor for a factor.
ResampleAxis cubic_axis(int in, int out, float src_per_dst);
// bicubic, align_corners=True, antialias=False, A = -0.75: source i·(in−1)/(out−1), so the
// corner samples land on the corner inputs (torchvision's interpolate_embeddings).
ResampleAxis cubic_corners_axis(int in, int out);
// bilinear, align_corners=False, antialias=False: source (i + 0.5)·in/out − 0.5 clamped at 0,
// the two neighbours clamped to [0, in-1].
ResampleAxis linear_axis(int in, int out);
// bicubic, antialias=True (A = -0.5, support widened when shrinking, renormalized).
ResampleAxis cubic_antialias_axis(int in, int out);

// Resamples src [in_h, in_w, channels] to [ys.size(), xs.size(), channels]: W pass first,
// then H pass, like PyTorch's separable antialiased kernel.
std::vector<float> resample_hwc(const float* src, int in_h, int in_w, int channels, const ResampleAxis& ys,
                                const ResampleAxis& xs);

}  // namespace vitreg
