#pragma once
// Which patch tokens are artifacts (docs/design.md, "Artifact metrics"): one rule, applied
// wherever outlines are drawn or counted (compare, explore, study, maps, dense).
//   norm       the token's norm is an outlier among the image's patches;
//   direction  its |cos| with the layer's defect direction u_i is (SINDER: real artifacts share
//              one direction across images, objects do not);
//   both       both tests hold.
// An outlier is a value above median + k·MAD over the image's patches (MAD unscaled), the rule
// `--evict artifacts` applies to norms (core/robust_outliers.hpp).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vitreg/analysis/defects.hpp"
#include "vitreg/enum_names.hpp"
#include "vitreg/model.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

enum class ArtifactTest { Norm, Direction, Both };

template <>
struct EnumTable<ArtifactTest> {
    static constexpr const char* what = "artifact rule";
    static constexpr EnumName<ArtifactTest> names[] = {
        {ArtifactTest::Norm, "norm"}, {ArtifactTest::Direction, "direction"}, {ArtifactTest::Both, "both"}};
};

struct ArtifactRule {
    ArtifactTest test = ArtifactTest::Norm;
    float mad_k = 10.0f;  // each test: value > median + k·MAD (MAD unscaled); ~150 for DINOv2-L's norms
    // The direction test's u_i: read from `defects_file` when one is named, else computed from
    // the model's weights (for_model) with `fit`'s sample.
    std::string defects_file;
    DefectOptions fit;
    std::shared_ptr<const DefectDirections> defects;

    bool uses_directions() const { return test != ArtifactTest::Norm; }
    // This rule ready for `model`: its directions read or computed where the test needs them and
    // checked against the model's depth and width (UsageError naming the file otherwise).
    ArtifactRule for_model(const Model& model) const;
    // The same, with the directions read or computed whatever the test (the study's defect row).
    ArtifactRule with_directions(const Model& model) const;
    // Asks `probe` for what the tests read (norms; every token's |cos| with its layer's u_i).
    void ask(Probe& probe) const;
    // Image b's flagged patches at `layer`, as token indices (CLS = 0), in order.
    std::vector<int> flag(const Trace& trace, int b, int layer) const;
    // "norm > median + 10·MAD", "|cos(x, u_i)| > median + 10·MAD", or both joined by "and".
    std::string describe() const;
    // The rule, k, its text and where the directions came from (outputs write it beside counts).
    nlohmann::json to_json() const;
};

}  // namespace vitreg
