#pragma once
// Attention of any query, recomputed from a layer's recorded q and k (Probe::qkv_layers)
// instead of running the model again: what an interactive viewer needs on every click.
// The rows are normalized as the model's forward normalized them: its normalizer and sink
// logits, the keys it evicted (Trace::evicted) and, in reduced precision, q and scale·k
// rounded to bf16 as its attention kernels round them.
#include <vector>

#include "vitreg/model.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

struct QueryAttention {
    std::vector<float> rows;        // [heads, queries, tokens] probabilities
    std::vector<float> abstention;  // [heads, queries] 1 - Σp
};

// Rows of token `query` in qkv slot `slot` of image b, as `model` computed them: [heads, tokens].
QueryAttention query_attention(const Model& model, const Trace& trace, int slot, int b, int query);
// Rows of several queries at once (one matrix product per head): [heads, queries, tokens].
QueryAttention query_attention(const Model& model, const Trace& trace, int slot, int b, const std::vector<int>& queries);

// Every query's rows of qkv slot `slot`, heads fused by their mean: [tokens, tokens] (the
// input of attention rollout). One matrix product per head instead of a loop per query.
std::vector<float> mean_attention(const Model& model, const Trace& trace, int slot, int b);

}  // namespace vitreg
