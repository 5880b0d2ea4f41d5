#pragma once
// Artifact and outlier statistics of one image's Trace (docs/design.md, "Artifact metrics"), named
// as they appear in stats.json / stats.csv.
#include <vector>

#include "vitreg/analysis/artifact_rule.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

struct ArtifactRules {
    float norm_threshold = 150.0f;  // absolute rule: DINOv2-L's artifacts exceed 150
    ArtifactRule rule;              // which patches are artifacts (outlined, counted); its k is the robust norm rule's too
    float sink_alpha = 0.3f;        // a head sinks when some key receives mean attention α > this
};

// One layer's residual stream (after the block), over the patch tokens unless stated.
struct LayerStats {
    int layer = 0;
    float norm_min = 0, norm_median = 0, norm_max = 0, norm_mad = 0;
    float max_inf_norm = 0;  // max |x| over all tokens and channels
    float kurtosis = 0;      // μ4/σ⁴ over all tokens × channels, Pearson (not excess)
    float cls_norm = 0;
    float register_norm_mean = 0;  // 0 without registers
    int artifacts_abs = 0;         // patches with norm > norm_threshold
    float artifact_fraction_abs = 0;
    float robust_threshold = 0;    // median + k·MAD
    int artifacts_robust = 0;
    float artifact_fraction_robust = 0;
    int artifacts_flagged = 0;     // patches the artifact rule flags (ArtifactRules::rule; norm: = artifacts_robust)
    float artifact_fraction_flagged = 0;
    std::vector<int> artifact_tokens_abs, artifact_tokens_robust, artifact_tokens_flagged;  // token indices (CLS = 0)
};

// One head of one layer.
struct HeadStats {
    int layer = 0, head = 0;
    float top_key_mass = 0;  // max over keys of α_k = (1/N) Σ_i A_ik
    int top_key = 0;         // its token index
    bool sinks = false;      // top_key_mass > sink_alpha
    float mean_abstention = 0;   // mean over queries of 1 - Σp
    float cls_on_registers = 0;  // share of the CLS row's attention on register tokens
};

struct ImageStats {
    std::vector<LayerStats> layers;
    std::vector<HeadStats> heads;  // layer-major
    // The sink rate of a layer: the fraction of its heads that sink.
    float sink_rate(int layer) const;
    float mean_abstention(int layer) const;
    float cls_on_registers(int layer) const;
    float top_key_mass(int layer) const;
};

// One layer of image b (needs a trace with norms, and the direction cosines where the rule tests
// directions: ArtifactRule::ask); the robust rule's tokens are what `--evict artifacts` and the
// register-neuron search take as the outliers.
LayerStats layer_stats(const Trace& trace, int b, int layer, const ArtifactRules& rules = {});

// Needs a trace with norms; head statistics need key_mass, abstention and the CLS rows of
// every layer (Probe::statistics records all of them).
ImageStats image_stats(const Trace& trace, int b, const ArtifactRules& rules = {});

}  // namespace vitreg
