#include "vitreg/analysis/query_attention.hpp"

#include <Eigen/Core>
#include <cmath>

#include "core/quantize.hpp"
#include "core/attention.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/rollout.hpp"

namespace vitreg {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// How the forward turned one layer's scores into probabilities.
struct LayerRule {
    AttentionKind kind;
    std::vector<float> sinks;
    bool bf16;
    const std::uint8_t* evicted;  // [heads, tokens] of image b, or null

    float normalize(float* row, int tokens, int h) const {
        if (evicted)
            for (int k = 0; k < tokens; ++k)
                if (evicted[static_cast<std::size_t>(h) * tokens + k]) row[k] = -INFINITY;
        const float null_mass = normalize_attention(row, static_cast<std::size_t>(tokens), kind,
                                                    kind == AttentionKind::Sink ? sinks.at(static_cast<std::size_t>(h)) : 0.0f);
        if (evicted)  // the normalizer flushes e^−∞ to e^−87.3, as the forward's: make it exactly 0
            for (int k = 0; k < tokens; ++k)
                if (evicted[static_cast<std::size_t>(h) * tokens + k]) row[k] = 0.0f;
        return null_mass;
    }
};

LayerRule rule_of(const Model& model, const Trace& t, int slot, int b, const std::vector<int>& queries) {
    if (slot < 0 || slot >= static_cast<int>(t.qkv_layers.size())) throw UsageError("query_attention: layer not recorded");
    if (b < 0 || b >= t.batch) throw UsageError("query_attention: image out of range");
    for (int query : queries)
        if (query < 0 || query >= t.tokens) throw UsageError("query_attention: query out of range");
    const int layer = t.qkv_layers[static_cast<std::size_t>(slot)];
    const std::uint8_t* evicted =
        t.evicted.empty() ? nullptr : t.evicted.data() + (static_cast<std::size_t>(layer) * t.batch + b) * t.heads * t.tokens;
    return {model.config().attention, model.sink_logits(layer), model.precision().precision != Precision::Fp32, evicted};
}

// Head h's queries (rounded as the forward rounds them) and its keys as scale·k.
void head_operands(const Trace& t, int slot, int b, int h, bool bf16, RowMajor& q, RowMajor& k) {
    const int D = t.dim, hd = D / t.heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const float* qkv = t.qkv_of(slot, b);
    q.resize(t.tokens, hd);
    k.resize(t.tokens, hd);
    for (int i = 0; i < t.tokens; ++i)
        for (int d = 0; d < hd; ++d) {
            const float* token = qkv + static_cast<std::size_t>(i) * 3 * D + h * hd + d;
            const float qv = token[0], kv = scale * token[D];
            q(i, d) = bf16 ? quant::round_bf16(qv) : qv;
            k(i, d) = bf16 ? quant::round_bf16(kv) : kv;
        }
}

}  // namespace

QueryAttention query_attention(const Model& model, const Trace& t, int slot, int b, const std::vector<int>& queries) {
    const LayerRule rule = rule_of(model, t, slot, b, queries);
    const Eigen::Index n = t.tokens, count = static_cast<Eigen::Index>(queries.size());
    QueryAttention out;
    out.rows.resize(static_cast<std::size_t>(t.heads) * count * n);
    out.abstention.resize(static_cast<std::size_t>(t.heads) * count);
    RowMajor q, k, chosen(count, 0);
    for (int h = 0; h < t.heads; ++h) {
        head_operands(t, slot, b, h, rule.bf16, q, k);
        chosen.resize(count, q.cols());
        for (Eigen::Index i = 0; i < count; ++i) chosen.row(i) = q.row(queries[static_cast<std::size_t>(i)]);
        Eigen::Map<RowMajor> rows(out.rows.data() + static_cast<std::size_t>(h) * count * n, count, n);
        rows.noalias() = chosen * k.transpose();
        for (Eigen::Index i = 0; i < count; ++i)
            out.abstention[static_cast<std::size_t>(h * count + i)] = rule.normalize(rows.row(i).data(), t.tokens, h);
    }
    return out;
}

QueryAttention query_attention(const Model& model, const Trace& t, int slot, int b, int query) {
    return query_attention(model, t, slot, b, std::vector<int>{query});
}

std::vector<float> mean_attention(const Model& model, const Trace& t, int slot, int b) {
    std::vector<int> every(static_cast<std::size_t>(t.tokens));
    for (int i = 0; i < t.tokens; ++i) every[static_cast<std::size_t>(i)] = i;
    // [heads, tokens × tokens]: each head's matrix is one row for fuse_heads.
    return fuse_heads(query_attention(model, t, slot, b, every).rows.data(), t.heads, t.tokens * t.tokens, HeadFusion::Mean);
}

}  // namespace vitreg
