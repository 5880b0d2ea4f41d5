#pragma once
// Tensor shapes as the sources store them.
#include <cstdint>
#include <vector>

namespace vitreg::source {

// Shape without its leading 1s: OpenCLIP stores class_embedding [D] where dinov2 has [1, 1, D].
inline std::vector<std::int64_t> squeezed(const std::vector<std::int64_t>& shape) {
    std::size_t k = 0;
    while (k + 1 < shape.size() && shape[k] == 1) ++k;
    return std::vector<std::int64_t>(shape.begin() + static_cast<std::ptrdiff_t>(k), shape.end());
}

}  // namespace vitreg::source
