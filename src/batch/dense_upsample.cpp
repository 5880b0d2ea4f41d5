#include "feature_upsampler.hpp"

#include <algorithm>
#include <cmath>

#include "core/resample.hpp"
#include "core/vector_loops.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

FeatureUpsampler::FeatureUpsampler(const float* grid, int grid_h, int grid_w, int channels, int out_h, int out_w,
                                   UpsampleMethod method, const GuideImage* guide, const JbuOptions& jbu)
    : grid_(grid), grid_h_(grid_h), grid_w_(grid_w), channels_(channels), out_h_(out_h), out_w_(out_w), method_(method),
      jbu_(jbu) {
    if (method != UpsampleMethod::Jbu) {
        ys_ = linear_axis(grid_h, out_h);
        xs_ = linear_axis(grid_w, out_w);
        return;
    }
    if (!guide || guide->rgb.empty()) throw UsageError("--upsample jbu needs the image's pixels as its guide");
    if (!(jbu.sigma_spatial > 0) || !(jbu.sigma_range > 0) || jbu.radius < 0)
        throw UsageError("--jbu-sigma-spatial and --jbu-sigma-range must be above 0, --jbu-radius at least 0");
    guide_out_ = guide->height == out_h && guide->width == out_w
                     ? guide->rgb
                     : resample_hwc(guide->rgb.data(), guide->height, guide->width, 3, linear_axis(guide->height, out_h),
                                    linear_axis(guide->width, out_w));
    guide_grid_ = resample_hwc(guide_out_.data(), out_h, out_w, 3, linear_axis(out_h, grid_h), linear_axis(out_w, grid_w));
}

void FeatureUpsampler::row(int y, float* out) const {
    const std::size_t C = static_cast<std::size_t>(channels_);
    const loops::Table& loops = loops::active();
    if (method_ == UpsampleMethod::Bilinear) {
        if (grid_h_ == out_h_ && grid_w_ == out_w_) {
            std::copy(grid_ + static_cast<std::size_t>(y) * out_w_ * C, grid_ + static_cast<std::size_t>(y + 1) * out_w_ * C, out);
            return;
        }
        // The H pass once for the row (its source rows blended across the grid's width), then
        // each pixel's W pass over the blended row: two taps per pixel instead of four.
        const ResampleTaps& ty = ys_[static_cast<std::size_t>(y)];
        const float* sources[2];
        for (std::size_t a = 0; a < ty.index.size(); ++a) sources[a] = grid_ + static_cast<std::size_t>(ty.index[a]) * grid_w_ * C;
        std::vector<float> blended(static_cast<std::size_t>(grid_w_) * C);
        loops.weighted_rows(sources, ty.weight.data(), static_cast<int>(ty.index.size()), blended.size(), 1.0f, blended.data());
        for (int x = 0; x < out_w_; ++x) {
            const ResampleTaps& tx = xs_[static_cast<std::size_t>(x)];
            const float* cells[2];
            for (std::size_t b = 0; b < tx.index.size(); ++b) cells[b] = blended.data() + static_cast<std::size_t>(tx.index[b]) * C;
            loops.weighted_rows(cells, tx.weight.data(), static_cast<int>(tx.index.size()), C, 1.0f,
                                out + static_cast<std::size_t>(x) * C);
        }
        return;
    }
    const double sy = static_cast<double>(grid_h_) / out_h_, sx = static_cast<double>(grid_w_) / out_w_;
    const double inv_s = 1.0 / (2 * jbu_.sigma_spatial * jbu_.sigma_spatial);
    const double inv_r = 1.0 / (2 * jbu_.sigma_range * jbu_.sigma_range);
    const int r = jbu_.radius;
    const double py = (y + 0.5) * sy;  // the pixel's centre in grid cells
    const int cy = std::clamp(static_cast<int>(std::floor(py)), 0, grid_h_ - 1);
    const std::size_t most = static_cast<std::size_t>(2 * r + 1) * (2 * r + 1);
    std::vector<const float*> cells(most);
    std::vector<float> weights(most);
    for (int x = 0; x < out_w_; ++x) {
        const double px = (x + 0.5) * sx;
        const int cx = std::clamp(static_cast<int>(std::floor(px)), 0, grid_w_ - 1);
        const float* ip = guide_out_.data() + (static_cast<std::size_t>(y) * out_w_ + x) * 3;
        int taps = 0;
        for (int i = std::max(0, cy - r); i <= std::min(grid_h_ - 1, cy + r); ++i)
            for (int j = std::max(0, cx - r); j <= std::min(grid_w_ - 1, cx + r); ++j) {
                const double dy = py - (i + 0.5), dx = px - (j + 0.5);
                const float* iq = guide_grid_.data() + (static_cast<std::size_t>(i) * grid_w_ + j) * 3;
                double range = 0;
                for (int k = 0; k < 3; ++k) range += (ip[k] - iq[k]) * static_cast<double>(ip[k] - iq[k]);
                weights[static_cast<std::size_t>(taps)] = static_cast<float>(-(dy * dy + dx * dx) * inv_s - range * inv_r);
                cells[static_cast<std::size_t>(taps++)] = grid_ + (static_cast<std::size_t>(i) * grid_w_ + j) * C;
            }
        // The weights' exponentials in one vector pass, less their largest exponent (which the
        // division cancels, and which keeps a narrow range kernel from underflowing every weight).
        const float total = loops.exp_sum(weights.data(), static_cast<std::size_t>(taps),
                                          loops.row_max(weights.data(), static_cast<std::size_t>(taps)));
        // Float sums of at most (2r+1)² terms: well inside 1e-5 of the double reference.
        loops.weighted_rows(cells.data(), weights.data(), taps, C, 1 / total, out + static_cast<std::size_t>(x) * C);
    }
}

}  // namespace vitreg
