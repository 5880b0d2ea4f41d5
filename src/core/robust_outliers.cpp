#include "core/robust_outliers.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace vitreg {

float median_of(std::vector<float> v) { return v.empty() ? 0.0f : median_in_place(v); }

RobustSpread robust_spread(const std::vector<float>& values) {
    RobustSpread s;
    s.median = median_of(values);
    std::vector<float> dev(values.size());
    std::transform(values.begin(), values.end(), dev.begin(), [&](float v) { return std::fabs(v - s.median); });
    s.mad = median_of(dev);
    return s;
}

std::vector<int> robust_outliers(const std::vector<float>& values, float k) {
    const float threshold = robust_spread(values).threshold(k);
    std::vector<int> out;
    for (std::size_t i = 0; i < values.size(); ++i)
        if (values[i] > threshold) out.push_back(static_cast<int>(i));
    return out;
}

}  // namespace vitreg
