#pragma once
// The model-free outlier rule (docs/design.md, "Artifact metrics"): a value is an outlier when it
// exceeds median + k·MAD, MAD the unscaled median absolute deviation. `--evict artifacts` (core)
// and the artifact statistics (analysis) both apply it, so they agree on which tokens are
// artifacts.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace vitreg {

struct RobustSpread {
    float median = 0, mad = 0;
    float threshold(float k) const { return median + k * mad; }
};

// The median of a non-empty vector, reordering it (the mean of the middle two for an even count).
template <class T>
T median_in_place(std::vector<T>& v) {
    const std::size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    const T hi = v[mid];
    if (v.size() % 2) return hi;
    return T(0.5) * (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + hi);
}
// The same on a copy; 0 when empty.
float median_of(std::vector<float> values);
RobustSpread robust_spread(const std::vector<float>& values);
// The indices of `values` above robust_spread(values).threshold(k), in order.
std::vector<int> robust_outliers(const std::vector<float>& values, float k);

}  // namespace vitreg
