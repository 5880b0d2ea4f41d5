#include "core/attention.hpp"

#include "vector_loops.hpp"

namespace vitreg {

float normalize_attention(float* z, std::size_t n, AttentionKind kind, float sink) {
    return loops::active().normalize_attention(z, n, kind, sink);
}

}  // namespace vitreg
