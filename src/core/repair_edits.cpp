#include "core/repair_edits.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/defect_direction_rows.hpp"
#include "core/repairs/repair_type.hpp"
#include "core/robust_outliers.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

std::vector<std::uint8_t> outlier_mask(const std::vector<float>& values, float mad_k) {
    std::vector<std::uint8_t> flagged(values.size(), 0);
    for (int i : robust_outliers(values, mad_k)) flagged[i] = 1;
    return flagged;
}

int reflect(int i, int n) { return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i; }

}  // namespace

std::vector<std::uint8_t> flag_artifact_patches(const float* patches, int count, int dim, float mad_k) {
    std::vector<float> norms(count);
    for (int i = 0; i < count; ++i) {
        double sq = 0;
        for (int d = 0; d < dim; ++d) sq += static_cast<double>(patches[static_cast<std::size_t>(i) * dim + d]) * patches[static_cast<std::size_t>(i) * dim + d];
        norms[i] = static_cast<float>(std::sqrt(sq));
    }
    return outlier_mask(norms, mad_k);
}

std::vector<std::uint8_t> flag_direction_patches(const float* patches, int count, int dim, const float* u, float mad_k) {
    std::vector<float> cosines(count);
    for (int i = 0; i < count; ++i) cosines[i] = abs_cosine(patches + static_cast<std::size_t>(i) * dim, u, dim);
    return outlier_mask(cosines, mad_k);
}

void inpaint_flagged(float* patches, int gh, int gw, int dim, const std::vector<std::uint8_t>& flagged) {
    if (std::find(flagged.begin(), flagged.end(), 0) == flagged.end()) return;  // nothing to take a mean of
    const std::vector<float> before(patches, patches + static_cast<std::size_t>(gh) * gw * dim);
    std::vector<double> sum(dim);
    for (int row = 0; row < gh; ++row)
        for (int col = 0; col < gw; ++col) {
            if (!flagged[static_cast<std::size_t>(row) * gw + col]) continue;
            int count = 0;
            for (int r = 1; count == 0; ++r) {
                std::fill(sum.begin(), sum.end(), 0.0);
                for (int y = std::max(0, row - r); y <= std::min(gh - 1, row + r); ++y)
                    for (int x = std::max(0, col - r); x <= std::min(gw - 1, col + r); ++x) {
                        const std::size_t cell = static_cast<std::size_t>(y) * gw + x;
                        if (flagged[cell]) continue;
                        ++count;
                        for (int d = 0; d < dim; ++d) sum[d] += before[cell * dim + d];
                    }
            }
            float* out = patches + (static_cast<std::size_t>(row) * gw + col) * dim;
            for (int d = 0; d < dim; ++d) out[d] = static_cast<float>(sum[d] / count);
        }
}

std::vector<float> shifted_pixels(const float* pixels, int batch, int height, int width, int patch,
                                  const std::vector<std::array<int, 2>>& shifts) {
    const std::size_t image = static_cast<std::size_t>(3) * height * width;
    std::vector<float> out((shifts.size() - 1) * batch * image);
    for (std::size_t k = 1; k < shifts.size(); ++k) {
        const int dy = shifts[k][0] * patch, dx = shifts[k][1] * patch;
        if (std::abs(dy) >= height || std::abs(dx) >= width)
            throw UsageError("@denoise=shift:" + std::to_string(shifts.size()) + ": a shift of (" +
                             std::to_string(shifts[k][0]) + ", " + std::to_string(shifts[k][1]) +
                             ") patches does not fit a " + std::to_string(width) + "x" + std::to_string(height) + " input");
        for (int b = 0; b < batch; ++b)
            for (int ch = 0; ch < 3; ++ch) {
                const float* src = pixels + (static_cast<std::size_t>(b) * 3 + ch) * height * width;
                float* dst = out.data() + ((k - 1) * batch + b) * image + static_cast<std::size_t>(ch) * height * width;
                for (int y = 0; y < height; ++y) {
                    const float* src_row = src + static_cast<std::size_t>(reflect(y - dy, height)) * width;
                    for (int x = 0; x < width; ++x) dst[static_cast<std::size_t>(y) * width + x] = src_row[reflect(x - dx, width)];
                }
            }
    }
    return out;
}

void apply_repairs(const std::vector<Repair>& repairs, int layer, float* x, const StreamShape& s, const Config& c,
                   const ShiftedStreams* shifted) {
    for (const Repair& r : repairs) {
        const auto layers = r.layers_of(c.depth);
        if (std::find(layers.begin(), layers.end(), layer) != layers.end()) r.type->edit(r, layer, x, s, c, shifted);
    }
}

}  // namespace vitreg
