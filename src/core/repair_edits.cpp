#include "core/repair_edits.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/defect_direction_rows.hpp"
#include "core/pos_embed.hpp"
#include "core/robust_outliers.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

float* patch_rows(float* x, const StreamShape& s, int b) {
    return x + (static_cast<std::size_t>(b) * s.tokens + s.first_patch) * s.dim;
}

// Debias: the calibrated map on this grid minus its per-channel median over positions, so that
// only what is tied to a position goes (the median keeps the few artifact cells out of it).
void subtract_position_map(const RepairCalibration& cal, float* x, const StreamShape& s, const Config& c) {
    const int D = s.dim, cells = cal.grid * cal.grid;
    std::vector<float> centre(D);
    std::vector<float> column(cells);
    for (int d = 0; d < D; ++d) {
        for (int i = 0; i < cells; ++i) column[i] = cal.bias[static_cast<std::size_t>(i) * D + d];
        centre[d] = median_of(column);
    }
    // Resampled as the model resamples its position embedding (docs/design.md, "Repairs and dense evaluation").
    const std::vector<float> map = resample_pos_embed(cal.bias, cal.grid, D, s.grid_h, s.grid_w, c.pos_interp);
    const std::size_t np = static_cast<std::size_t>(s.grid_h) * s.grid_w;
    for (int b = 0; b < s.batch; ++b) {
        float* p = patch_rows(x, s, b);
        for (std::size_t i = 0; i < np; ++i)
            for (int d = 0; d < D; ++d) p[i * D + d] -= map[i * D + d] - centre[d];
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

// Shift-averaging: each cell's token from every forward whose shifted grid still holds it.
void combine_shifted(const Repair& r, float* x, const StreamShape& s, const ShiftedStreams& shifted) {
    const int D = s.dim, gh = s.grid_h, gw = s.grid_w;
    const std::size_t copy_size = static_cast<std::size_t>(s.batch) * s.tokens * D;
    if (shifted.shifts.size() != static_cast<std::size_t>(r.shifts) || shifted.rows.size() != (shifted.shifts.size() - 1) * copy_size)
        throw Error("denoise: the shifted forwards do not match the repair");
    std::vector<const float*> values;
    std::vector<float> channel;
    for (int b = 0; b < s.batch; ++b) {
        float* own = patch_rows(x, s, b);
        const std::vector<float> before(own, own + static_cast<std::size_t>(gh) * gw * D);
        for (int row = 0; row < gh; ++row)
            for (int col = 0; col < gw; ++col) {
                const std::size_t cell = static_cast<std::size_t>(row) * gw + col;
                values.assign(1, before.data() + cell * D);
                for (std::size_t k = 1; k < shifted.shifts.size(); ++k) {
                    const int y = row + shifted.shifts[k][0], xx = col + shifted.shifts[k][1];
                    if (y < 0 || y >= gh || xx < 0 || xx >= gw) continue;
                    const float* copy = shifted.rows.data() + (k - 1) * copy_size;
                    values.push_back(copy + (static_cast<std::size_t>(b) * s.tokens + s.first_patch + y * gw + xx) * D);
                }
                for (int d = 0; d < D; ++d) {
                    if (r.median) {
                        channel.clear();
                        for (const float* v : values) channel.push_back(v[d]);
                        own[cell * D + d] = median_of(channel);
                    } else {
                        double sum = 0;
                        for (const float* v : values) sum += v[d];
                        own[cell * D + d] = static_cast<float>(sum / static_cast<double>(values.size()));
                    }
                }
            }
    }
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
                combine_shifted(r, x, s, *shifted);
                break;
        }
    }
}

}  // namespace vitreg
