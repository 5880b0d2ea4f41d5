#include "vitreg/features.hpp"

namespace vitreg {

std::vector<float> Features::pooled_of(int b) const {
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
