#include "core/pos_embed.hpp"

#include "core/resample.hpp"

namespace vitreg {

namespace {

ResampleAxis axis_for(int M, int out, PosInterp mode) {
    switch (mode) {
        case PosInterp::Offset:
            // interpolate(scale_factor=(out+0.1)/M): PyTorch uses 1/scale_factor, not M/out.
            return cubic_axis(M, out, static_cast<float>(1.0 / ((out + 0.1) / M)));
        case PosInterp::Size:
            return cubic_axis(M, out, static_cast<float>(M) / static_cast<float>(out));
        case PosInterp::Antialias:
            return cubic_antialias_axis(M, out);
        case PosInterp::Corners:
            return cubic_corners_axis(M, out);
    }
    return {};
}

}  // namespace

std::vector<float> resample_pos_embed(const std::vector<float>& grid, int M, int D, int h, int w, PosInterp mode) {
    if (h == M && w == M) return grid;
    return resample_hwc(grid.data(), M, M, D, axis_for(M, h, mode), axis_for(M, w, mode));
}

}  // namespace vitreg
