#pragma once
// The three attention normalizers, in the one stable form every caller uses:
// with m = max(s, max z):  p_i = e^(z_i - m) / (e^(s - m) + Σ_j e^(z_j - m)).
// Softmax has no s term; softmax-1 is s = 0; a sink uses the head's learned logit.
#include <cstddef>

#include "vitreg/config.hpp"

namespace vitreg {

// Turns the scores z[0..n) into probabilities in place and returns the abstention (null)
// mass 1 - Σp = e^(s-m) / (e^(s-m) + Σ e^(z-m)), which is 0 for softmax. `sink` is read for
// AttentionKind::Sink only.
float normalize_attention(float* z, std::size_t n, AttentionKind kind, float sink = 0.0f);

}  // namespace vitreg
