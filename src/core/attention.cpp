#include "vitreg/attention.hpp"

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace vitreg {

namespace {

// e^x for x ≤ 0 (scores minus their maximum), within 1e-6 relative of exp down to e^-87
// (test_attention) and flushed to e^-87.3 below; NaN stays NaN. Cephes' range reduction and polynomial, written as
// straight-line code so that the loops calling it vectorize for whatever -march the library
// gets. 2^n is built from the bits of the rounding sum, in unsigned arithmetic: no float→int
// conversion, so a NaN score (from a broken checkpoint) has no undefined behaviour.
inline float exp_nonpositive(float x) {
    x = x < -87.3f ? -87.3f : x;
    constexpr float kShifter = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
    constexpr std::uint32_t kShifterBits = 0x4B400000u;
    const float shifted = x * 1.44269504088896341f + kShifter;  // holds n = round(x·log2 e)
    const float n = shifted - kShifter;
    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    std::uint32_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    bits = (bits - kShifterBits + 127u) << 23;  // the float 2^n
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

constexpr std::size_t kLanes = 16;  // partial sums, one per vector lane: a fixed summation order

}  // namespace

float normalize_attention(float* z, std::size_t n, AttentionKind kind, float sink) {
    const bool abstains = kind != AttentionKind::Softmax;
    const float s = kind == AttentionKind::Sink ? sink : 0.0f;
    float m = n ? Eigen::Map<const Eigen::ArrayXf>(z, static_cast<Eigen::Index>(n)).maxCoeff() : s;
    if (abstains && s > m) m = s;
    for (std::size_t i = 0; i < n; ++i) z[i] = exp_nonpositive(z[i] - m);
    // Blocked partial sums: a summation order fixed by n alone, never by the row's alignment.
    float part[kLanes] = {};
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (std::size_t j = 0; j < kLanes; ++j) part[j] += z[i + j];
    for (std::size_t j = 0; i + j < n; ++j) part[j] += z[i + j];
    for (std::size_t w = kLanes / 2; w > 0; w /= 2)
        for (std::size_t j = 0; j < w; ++j) part[j] += part[j + w];
    const float null_term = abstains ? exp_nonpositive(s - m) : 0.0f;
    const float denom = part[0] + null_term;
    const float inv = 1.0f / denom;
    for (std::size_t k = 0; k < n; ++k) z[k] *= inv;
    return null_term / denom;
}

}  // namespace vitreg
