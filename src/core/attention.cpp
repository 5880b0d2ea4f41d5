#include "vitreg/attention.hpp"

#include <Eigen/Core>
#include <cmath>

namespace vitreg {

float normalize_attention(float* z, std::size_t n, AttentionKind kind, float sink) {
    Eigen::Map<Eigen::ArrayXf> a(z, static_cast<Eigen::Index>(n));
    const bool abstains = kind != AttentionKind::Softmax;
    const float s = kind == AttentionKind::Sink ? sink : 0.0f;
    float m = n ? a.maxCoeff() : s;
    if (abstains && s > m) m = s;
    a = (a - m).exp();
    const float null_term = abstains ? std::exp(s - m) : 0.0f;
    const float denom = a.sum() + null_term;
    a *= 1.0f / denom;
    return null_term / denom;
}

}  // namespace vitreg
