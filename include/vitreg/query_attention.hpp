#pragma once
// Attention of any query, recomputed from a layer's recorded q and k (Probe::qkv_layers)
// instead of running the model again: what an interactive viewer needs on every click.
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

struct QueryAttention {
    std::vector<float> rows;        // [heads, tokens] probabilities
    std::vector<float> abstention;  // [heads] 1 - Σp
};

// Rows of token `query` in qkv slot `slot` of image b, normalized like the forward did
// (`sinks`: that layer's per-head logits, read for AttentionKind::Sink).
QueryAttention query_attention(const Trace& trace, int slot, int b, int query, AttentionKind kind,
                               const std::vector<float>& sinks);

}  // namespace vitreg
