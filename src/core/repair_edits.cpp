#include "core/repair_edits.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <tbb/parallel_for.h>

#include "core/defect_direction_rows.hpp"
#include "core/pos_embed.hpp"
#include "core/shift_decomposition.hpp"
#include "core/robust_outliers.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

float* patch_rows(float* x, const StreamShape& s, int b) {
    return x + (static_cast<std::size_t>(b) * s.tokens + s.first_patch) * s.dim;
}

// Debias: the calibrated map on this grid minus its per-channel median over positions, so that
// only what is tied to a position goes (the median keeps the few artifact cells out of it). Where
// that map is itself an outlier (its norm above median + 10·MAD over the positions: a locked
// artifact), it is scaled per image by the least-squares factor of the token's own deviation
// from the centre: the artifact's size varies by a few percent from image to image, which at
// ~80x the median norm is more than the rule allows, while its direction does not.
void subtract_position_map(const RepairCalibration& cal, float* x, const StreamShape& s, const Config& c) {
    const int D = s.dim, cells = cal.grid * cal.grid;
    std::vector<float> centre(D);
    std::vector<float> column(cells);
    for (int d = 0; d < D; ++d) {
        for (int i = 0; i < cells; ++i) column[i] = cal.bias[static_cast<std::size_t>(i) * D + d];
        centre[d] = median_of(column);
    }
    // Resampled as the model resamples its position embedding (docs/design.md, "Repairs and dense evaluation").
    std::vector<float> map = resample_pos_embed(cal.bias, cal.grid, D, s.grid_h, s.grid_w, c.pos_interp);
    const std::size_t np = static_cast<std::size_t>(s.grid_h) * s.grid_w;
    for (std::size_t i = 0; i < np; ++i)
        for (int d = 0; d < D; ++d) map[i * D + d] -= centre[d];
    const std::vector<std::uint8_t> locked = flag_artifact_patches(map.data(), static_cast<int>(np), D);
    for (int b = 0; b < s.batch; ++b) {
        float* p = patch_rows(x, s, b);
        for (std::size_t i = 0; i < np; ++i) {
            const float* m = map.data() + i * D;
            double scale = 1.0;
            if (locked[i]) {
                double along = 0, size = 0;
                for (int d = 0; d < D; ++d) {
                    along += (static_cast<double>(p[i * D + d]) - centre[d]) * m[d];
                    size += static_cast<double>(m[d]) * m[d];
                }
                scale = along / size;
            }
            for (int d = 0; d < D; ++d) p[i * D + d] -= static_cast<float>(scale * m[d]);
        }
    }
}

void replace_registers(const Repair& r, int layer, float* x, const StreamShape& s) {
    const std::size_t n = static_cast<std::size_t>(s.registers) * s.dim;
    for (int b = 0; b < s.batch; ++b) {
        float* reg = x + (static_cast<std::size_t>(b) * s.tokens + s.first_register) * s.dim;
        if (r.zero) std::fill(reg, reg + n, 0.0f);
        else std::copy_n(r.calibration->register_means.data() + static_cast<std::size_t>(layer) * n, n, reg);
    }
}

// Shift-denoising: each image's content part of its K shifted forwards (docs/design.md, "Repairs and
// dense evaluation"); x holds the unshifted forward, `shifted` the others.
void denoise_shifted(const Repair& r, float* x, const StreamShape& s, const ShiftedStreams& shifted) {
    const std::size_t copy_size = static_cast<std::size_t>(s.batch) * s.tokens * s.dim;
    if (shifted.shifts.size() != static_cast<std::size_t>(r.shifts) || shifted.rows.size() != (shifted.shifts.size() - 1) * copy_size)
        throw Error("denoise: the shifted forwards do not match the repair");
    tbb::parallel_for(0, s.batch, [&](int b) {
        float* own = patch_rows(x, s, b);
        std::vector<const float*> views{own};
        for (std::size_t k = 1; k < shifted.shifts.size(); ++k)
            views.push_back(shifted.rows.data() + (k - 1) * copy_size + (static_cast<std::size_t>(b) * s.tokens + s.first_patch) * s.dim);
        const ShiftDecomposition split = decompose_shifted(views, shifted.shifts, s.grid_h, s.grid_w, s.dim, r.median);
        std::copy(split.content.begin(), split.content.end(), own);
    });
}

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
        if (std::find(layers.begin(), layers.end(), layer) == layers.end()) continue;
        switch (r.kind) {
            case RepairKind::Inpaint:
                for (int b = 0; b < s.batch; ++b) {
                    float* p = patch_rows(x, s, b);
                    const int count = s.grid_h * s.grid_w;
                    inpaint_flagged(p, s.grid_h, s.grid_w, s.dim,
                                    r.directions ? flag_direction_patches(p, count, s.dim, r.directions->row(layer))
                                                 : flag_artifact_patches(p, count, s.dim));
                }
                break;
            case RepairKind::Debias: subtract_position_map(*r.calibration, x, s, c); break;
            case RepairKind::Registers: replace_registers(r, layer, x, s); break;
            case RepairKind::Denoise:
                if (!shifted) throw Error("denoise: the forward was not given its shifted forwards");
                denoise_shifted(r, x, s, *shifted);
                break;
        }
    }
}

}  // namespace vitreg
