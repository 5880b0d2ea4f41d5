#include "vitreg/query_attention.hpp"

#include <cmath>

#include "vitreg/attention.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

QueryAttention query_attention(const Trace& t, int slot, int b, int query, AttentionKind kind,
                               const std::vector<float>& sinks) {
    if (slot < 0 || slot >= static_cast<int>(t.qkv_layers.size())) throw UsageError("query_attention: layer not recorded");
    if (query < 0 || query >= t.tokens) throw UsageError("query_attention: query out of range");
    const int D = t.dim, H = t.heads, hd = D / H, stride = 3 * D;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const float* qkv = t.qkv_of(slot, b);
    QueryAttention out;
    out.rows.resize(static_cast<std::size_t>(H) * t.tokens);
    out.abstention.resize(H);
    for (int h = 0; h < H; ++h) {
        const float* q = qkv + static_cast<std::size_t>(query) * stride + h * hd;
        float* row = out.rows.data() + static_cast<std::size_t>(h) * t.tokens;
        for (int k = 0; k < t.tokens; ++k) {
            const float* key = qkv + static_cast<std::size_t>(k) * stride + D + h * hd;
            float z = 0;
            for (int d = 0; d < hd; ++d) z += (q[d] * scale) * key[d];
            row[k] = z;
        }
        out.abstention[h] = normalize_attention(row, static_cast<std::size_t>(t.tokens), kind,
                                                kind == AttentionKind::Sink ? sinks.at(static_cast<std::size_t>(h)) : 0.0f);
    }
    return out;
}

}  // namespace vitreg
