// @debias=FILE: the calibrated per-position mean map of vitreg calibrate-bias subtracted after its
// block, scaled per image where the map is an outlier (vitreg/repair.hpp).
#include <cmath>

#include "core/pos_embed.hpp"
#include "core/robust_outliers.hpp"
#include "core/repairs/repair_type.hpp"

namespace vitreg {

namespace {

void parse(Repair& r, const std::string& value, const std::string& word) {
    r.file = value;
    r.calibration = read_calibration(word, value);
}

std::string value_text(const Repair& r) { return r.file; }

std::vector<int> layers_of(const Repair& r, int) { return {r.calibration->layer}; }

// Debias: the calibrated map on this grid minus its per-channel median over positions, so that
// only what is tied to a position goes (the median keeps the few artifact cells out of it). Where
// that map is itself an outlier (its norm above median + 10·MAD over the positions: a locked
// artifact), it is scaled per image by the least-squares factor of the token's own deviation
// from the centre: the artifact's size varies by a few percent from image to image, which at
// ~80x the median norm is more than the rule allows, while its direction does not.
void edit(const Repair& r, int, float* x, const StreamShape& s, const Config& c, const ShiftedStreams*) {
    const RepairCalibration& cal = *r.calibration;
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

}  // namespace

const RepairType& debias_repair() {
    static const RepairType type{"debias", "debias=FILE",
                                 "@debias=FILE (minus the per-position mean map of vitreg calibrate-bias, scaled per "
                                 "image where the map is an outlier; 1 forward)",
                                 parse, value_text, layers_of, edit, nullptr};
    return type;
}

}  // namespace vitreg
