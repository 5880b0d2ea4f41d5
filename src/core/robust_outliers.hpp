#pragma once
// The model-free outlier rule (docs/design.md, "Artifact metrics"): a value is an outlier when it
// exceeds median + k·MAD, MAD the unscaled median absolute deviation. `--evict artifacts` (core)
// and the artifact statistics (analysis) both apply it, so they agree on which tokens are
// artifacts.
#include <vector>

namespace vitreg {

struct RobustSpread {
    float median = 0, mad = 0;
    float threshold(float k) const { return median + k * mad; }
};

// The median (the mean of the middle two for an even count; 0 when empty).
float median_of(std::vector<float> values);
RobustSpread robust_spread(const std::vector<float>& values);
// The indices of `values` above robust_spread(values).threshold(k), in order.
std::vector<int> robust_outliers(const std::vector<float>& values, float k);

}  // namespace vitreg
