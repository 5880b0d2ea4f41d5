#include "vitreg/features.hpp"

#include <algorithm>
#include <cmath>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// min and mean cosine over the rows of two [rows, dim] arrays.
void cosines(const float* a, const float* b, std::size_t rows, int dim, double& min, double& mean) {
    double sum = 0;
    min = 1;
    for (std::size_t r = 0; r < rows; ++r) {
        double ab = 0, aa = 0, bb = 0;
        for (int d = 0; d < dim; ++d) {
            const double x = a[r * dim + d], y = b[r * dim + d];
            ab += x * y, aa += x * x, bb += y * y;
        }
        const double c = aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
        min = std::min(min, c);
        sum += c;
    }
    mean = rows ? sum / static_cast<double>(rows) : 1.0;
}

}  // namespace

FeatureAgreement agreement(const Features& got, const Features& want) {
    if (got.batch != want.batch || got.dim != want.dim || got.registers != want.registers ||
        got.grid_h != want.grid_h || got.grid_w != want.grid_w)
        throw UsageError("features of different shapes cannot be compared");
    FeatureAgreement a;
    cosines(got.cls.data(), want.cls.data(), static_cast<std::size_t>(got.batch), got.dim, a.cls_cosine_min, a.cls_cosine_mean);
    cosines(got.patches.data(), want.patches.data(), static_cast<std::size_t>(got.batch) * got.patch_count(), got.dim,
            a.patch_cosine_min, a.patch_cosine_mean);
    double diff = 0, scale = 0;
    const auto absorb = [&](const std::vector<float>& g, const std::vector<float>& w) {
        for (std::size_t i = 0; i < w.size(); ++i) {
            diff = std::max(diff, std::fabs(double(g[i]) - w[i]));
            scale = std::max(scale, std::fabs(double(w[i])));
        }
    };
    absorb(got.cls, want.cls);
    absorb(got.reg_tokens, want.reg_tokens);
    absorb(got.patches, want.patches);
    a.max_relative_error = scale > 0 ? diff / scale : diff;
    return a;
}

std::vector<float> Features::pooled_of(int b) const {
    if (pooled.empty()) return mean_patch_of(b);
    const float* p = pooled.data() + static_cast<std::size_t>(b) * dim;
    return std::vector<float>(p, p + dim);
}

std::vector<float> Features::mean_patch_of(int b) const {
    std::vector<double> acc(static_cast<std::size_t>(dim), 0.0);
    const float* p = patches_of(b);
    const int n = patch_count();
    for (int i = 0; i < n; ++i)
        for (int d = 0; d < dim; ++d) acc[d] += p[static_cast<std::size_t>(i) * dim + d];
    std::vector<float> out(static_cast<std::size_t>(dim));
    for (int d = 0; d < dim; ++d) out[d] = static_cast<float>(acc[d] / n);
    return out;
}

}  // namespace vitreg
