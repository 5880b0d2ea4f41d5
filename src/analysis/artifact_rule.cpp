#include "vitreg/analysis/artifact_rule.hpp"

#include <algorithm>
#include <iomanip>
#include <iterator>
#include <sstream>

#include "core/robust_outliers.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

std::vector<int> patch_outliers(const float* values, const Trace& t, float k) {
    const int p0 = t.patch_offset();
    std::vector<int> out = robust_outliers(std::vector<float>(values + p0, values + p0 + t.patch_count()), k);
    for (int& i : out) i += p0;
    return out;
}

std::string k_text(float k) {
    std::ostringstream s;
    s << k;
    return s.str();
}

}  // namespace

ArtifactRule ArtifactRule::for_model(const Model& model) const {
    return uses_directions() ? with_directions(model) : *this;
}

ArtifactRule ArtifactRule::with_directions(const Model& model) const {
    ArtifactRule r = *this;
    const Config& c = model.config();
    if (!r.defects) {
        r.defects = std::make_shared<const DefectDirections>(defects_file.empty() ? defect_directions(model, fit)
                                                                                  : read_defects(defects_file));
    }
    check_defects_fit(*r.defects, c.depth, c.dim, defects_file.empty() ? std::string("--artifact-rule") : defects_file);
    return r;
}

void ArtifactRule::ask(Probe& probe) const {
    probe.norms = true;
    if (!uses_directions()) return;
    if (!defects) throw UsageError("artifact rule '" + name_of(test) + "' has no defect directions (ArtifactRule::for_model)");
    probe.directions = defects->directions;
}

std::vector<int> ArtifactRule::flag(const Trace& t, int b, int layer) const {
    if (t.norms.empty()) throw UsageError("artifact rule: the trace has no norms (ArtifactRule::ask)");
    std::vector<int> by_norm, by_direction;
    if (test != ArtifactTest::Direction) by_norm = patch_outliers(t.norms_of(layer, b), t, mad_k);
    if (test == ArtifactTest::Norm) return by_norm;
    if (t.direction_cos.empty())
        throw UsageError("artifact rule '" + name_of(test) + "': the trace has no direction cosines (ArtifactRule::ask)");
    by_direction = patch_outliers(t.direction_cos_of(layer, b), t, mad_k);
    if (test == ArtifactTest::Direction) return by_direction;
    std::vector<int> both;
    std::set_intersection(by_norm.begin(), by_norm.end(), by_direction.begin(), by_direction.end(), std::back_inserter(both));
    return both;
}

std::string ArtifactRule::describe() const {
    const std::string norm = "norm > median + " + k_text(mad_k) + "\u00b7MAD";
    const std::string direction = "|cos(x, u_i)| > median + " + k_text(mad_k) + "\u00b7MAD";
    switch (test) {
        case ArtifactTest::Norm: return norm;
        case ArtifactTest::Direction: return direction;
        case ArtifactTest::Both: return norm + " and " + direction;
    }
    return norm;
}

nlohmann::json ArtifactRule::to_json() const {
    nlohmann::json j = {{"rule", name_of(test)}, {"mad_k", mad_k}, {"text", describe()}};
    if (uses_directions()) {
        j["directions"] = defects_file.empty() ? "computed from the model's weights" : defects_file;
        if (defects) {
            j["fit"] = defects->fit_description();
        } else if (defects_file.empty()) {  // not computed yet: the fit they will be computed with
            DefectDirections planned;
            planned.samples = fit.samples;
            planned.seed = fit.seed;
            j["fit"] = planned.fit_description();
        }
    }
    return j;
}

}  // namespace vitreg
