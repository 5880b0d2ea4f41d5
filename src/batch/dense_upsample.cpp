#include "feature_upsampler.hpp"

#include <algorithm>
#include <cmath>

#include "core/resample.hpp"
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
    if (method_ == UpsampleMethod::Bilinear) {
        if (grid_h_ == out_h_ && grid_w_ == out_w_) {
            std::copy(grid_ + static_cast<std::size_t>(y) * out_w_ * C, grid_ + static_cast<std::size_t>(y + 1) * out_w_ * C, out);
            return;
        }
        // One row of resample_hwc: the W pass on the two source rows, then the H pass.
        const ResampleTaps& ty = ys_[static_cast<std::size_t>(y)];
        std::fill(out, out + static_cast<std::size_t>(out_w_) * C, 0.0f);
        std::vector<float> across(C);
        for (int x = 0; x < out_w_; ++x) {
            float* o = out + static_cast<std::size_t>(x) * C;
            for (std::size_t a = 0; a < ty.index.size(); ++a) {
                std::fill(across.begin(), across.end(), 0.0f);
                const float* src_row = grid_ + static_cast<std::size_t>(ty.index[a]) * grid_w_ * C;
                const auto& tx = xs_[static_cast<std::size_t>(x)];
                for (std::size_t b = 0; b < tx.index.size(); ++b) {
                    const float* cell = src_row + static_cast<std::size_t>(tx.index[b]) * C;
                    for (std::size_t c = 0; c < C; ++c) across[c] += tx.weight[b] * cell[c];
                }
                for (std::size_t c = 0; c < C; ++c) o[c] += ty.weight[a] * across[c];
            }
        }
        return;
    }
    const double sy = static_cast<double>(grid_h_) / out_h_, sx = static_cast<double>(grid_w_) / out_w_;
    const double inv_s = 1.0 / (2 * jbu_.sigma_spatial * jbu_.sigma_spatial);
    const double inv_r = 1.0 / (2 * jbu_.sigma_range * jbu_.sigma_range);
    const int r = jbu_.radius;
    const double py = (y + 0.5) * sy;  // the pixel's centre in grid cells
    const int cy = std::clamp(static_cast<int>(std::floor(py)), 0, grid_h_ - 1);
    std::vector<float> acc(C);  // float sums of at most (2r+1)² terms: vectorizes, and well inside 1e-5
    for (int x = 0; x < out_w_; ++x) {
        const double px = (x + 0.5) * sx;
        const int cx = std::clamp(static_cast<int>(std::floor(px)), 0, grid_w_ - 1);
        const float* ip = guide_out_.data() + (static_cast<std::size_t>(y) * out_w_ + x) * 3;
        std::fill(acc.begin(), acc.end(), 0.0f);
        double total = 0;
        for (int i = std::max(0, cy - r); i <= std::min(grid_h_ - 1, cy + r); ++i)
            for (int j = std::max(0, cx - r); j <= std::min(grid_w_ - 1, cx + r); ++j) {
                const double dy = py - (i + 0.5), dx = px - (j + 0.5);
                const float* iq = guide_grid_.data() + (static_cast<std::size_t>(i) * grid_w_ + j) * 3;
                double range = 0;
                for (int k = 0; k < 3; ++k) range += (ip[k] - iq[k]) * static_cast<double>(ip[k] - iq[k]);
                const float w = static_cast<float>(std::exp(-(dy * dy + dx * dx) * inv_s - range * inv_r));
                total += w;
                const float* cell = grid_ + (static_cast<std::size_t>(i) * grid_w_ + j) * C;
                for (std::size_t c = 0; c < C; ++c) acc[c] += w * cell[c];
            }
        float* o = out + static_cast<std::size_t>(x) * C;
        const float inv_total = static_cast<float>(1 / total);
        for (std::size_t c = 0; c < C; ++c) o[c] = acc[c] * inv_total;
    }
}

}  // namespace vitreg
