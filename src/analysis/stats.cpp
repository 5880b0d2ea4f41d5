#include "vitreg/analysis/stats.hpp"

#include <algorithm>
#include <cmath>

#include "core/robust_outliers.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

LayerStats layer_stats(const Trace& t, int b, int layer, const ArtifactRules& rules) {
    LayerStats s;
    s.layer = layer;
    const float* norms = t.norms_of(layer, b);
    const float* inf = t.max_abs_of(layer, b);
    const int p0 = t.patch_offset(), np = t.patch_count();
    std::vector<float> patch(norms + p0, norms + p0 + np);
    s.norm_min = *std::min_element(patch.begin(), patch.end());
    s.norm_max = *std::max_element(patch.begin(), patch.end());
    const RobustSpread spread = robust_spread(patch);
    s.norm_median = spread.median;
    s.norm_mad = spread.mad;
    s.max_inf_norm = *std::max_element(inf, inf + t.tokens);
    s.kurtosis = t.kurtosis[static_cast<std::size_t>(layer) * t.batch + b];
    s.cls_norm = t.class_token ? norms[0] : 0.0f;
    for (int r = 0; r < t.registers; ++r)
        s.register_norm_mean += norms[t.register_offset() + r] / static_cast<float>(t.registers);
    s.robust_threshold = spread.threshold(rules.rule.mad_k);
    for (int i = 0; i < np; ++i) {
        if (patch[i] > rules.norm_threshold) s.artifact_tokens_abs.push_back(p0 + i);
        if (patch[i] > s.robust_threshold) s.artifact_tokens_robust.push_back(p0 + i);
    }
    s.artifacts_abs = static_cast<int>(s.artifact_tokens_abs.size());
    s.artifacts_robust = static_cast<int>(s.artifact_tokens_robust.size());
    s.artifact_fraction_abs = static_cast<float>(s.artifacts_abs) / np;
    s.artifact_fraction_robust = static_cast<float>(s.artifacts_robust) / np;
    s.artifact_tokens_flagged = rules.rule.test == ArtifactTest::Norm ? s.artifact_tokens_robust : rules.rule.flag(t, b, layer);
    s.artifacts_flagged = static_cast<int>(s.artifact_tokens_flagged.size());
    s.artifact_fraction_flagged = static_cast<float>(s.artifacts_flagged) / np;
    return s;
}

namespace {

HeadStats head_stats(const Trace& t, int b, int layer, int h, const ArtifactRules& rules) {
    HeadStats s;
    s.layer = layer;
    s.head = h;
    if (!t.key_mass.empty()) {
        const float* mass = t.key_mass_of(layer, b, h);
        const float* top = std::max_element(mass, mass + t.tokens);
        s.top_key_mass = *top;
        s.top_key = static_cast<int>(top - mass);
        s.sinks = s.top_key_mass > rules.sink_alpha;
    }
    if (!t.abstention.empty()) {
        const float* a = t.abstention_of(layer, b, h);
        double sum = 0;
        for (int i = 0; i < t.tokens; ++i) sum += a[i];
        s.mean_abstention = static_cast<float>(sum / t.tokens);
    }
    const int slot = t.attention_slot(layer), q = t.query_slot(0);
    if (slot >= 0 && q >= 0 && t.registers > 0 && t.class_token) {
        const float* row = t.attention_row(slot, b, h, q);
        double reg = 0, all = 0;
        for (int k = 0; k < t.tokens; ++k) {
            all += row[k];
            if (k >= 1 && k <= t.registers) reg += row[k];
        }
        s.cls_on_registers = all > 0 ? static_cast<float>(reg / all) : 0.0f;
    }
    return s;
}

template <class F>
float mean_over_heads(const ImageStats& s, int layer, F value) {
    double sum = 0;
    int n = 0;
    for (const auto& h : s.heads)
        if (h.layer == layer) {
            sum += value(h);
            ++n;
        }
    return n ? static_cast<float>(sum / n) : 0.0f;
}

}  // namespace

ImageStats image_stats(const Trace& t, int b, const ArtifactRules& rules) {
    if (t.norms.empty()) throw UsageError("image_stats: the trace has no norms (Probe::norms)");
    ImageStats s;
    for (int l = 0; l < t.layers; ++l) {
        s.layers.push_back(layer_stats(t, b, l, rules));
        for (int h = 0; h < t.heads; ++h) s.heads.push_back(head_stats(t, b, l, h, rules));
    }
    return s;
}

float ImageStats::sink_rate(int layer) const {
    return mean_over_heads(*this, layer, [](const HeadStats& h) { return h.sinks ? 1.0 : 0.0; });
}
float ImageStats::mean_abstention(int layer) const {
    return mean_over_heads(*this, layer, [](const HeadStats& h) { return h.mean_abstention; });
}
float ImageStats::cls_on_registers(int layer) const {
    return mean_over_heads(*this, layer, [](const HeadStats& h) { return h.cls_on_registers; });
}
float ImageStats::top_key_mass(int layer) const {
    float best = 0;
    for (const auto& h : heads)
        if (h.layer == layer) best = std::max(best, h.top_key_mass);
    return best;
}

}  // namespace vitreg
