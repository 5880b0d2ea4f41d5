#include "vitreg/analysis/inspect.hpp"

#include <nlohmann/json.hpp>

#include "vitreg/image.hpp"

namespace vitreg {

Inspection inspect(const Model& model, const std::string& image_path, const ResizeSpec& resize, const Probe& probe,
                   int threads) {
    const Config& c = model.config();
    Inspection in;
    in.image_path = image_path;
    in.pixels = load_pixels(image_path, resize, c, ImageLimits{}, &in.geometry);
    in.features = model.forward(in.pixels.chw.data(), 1, in.pixels.height, in.pixels.width, probe, in.trace,
                                ForwardOptions{threads});
    return in;
}

namespace {

// A token index as users read it: {"index": 5, "kind": "patch", "row": 0, "col": 0}.
nlohmann::json token_json(int token, const Trace& t) {
    nlohmann::json j = {{"index", token}};
    if (t.class_token && token == 0) {
        j["kind"] = "cls";
    } else if (token < t.patch_offset()) {
        const int r = token - t.register_offset();
        j["kind"] = "register";
        j["register"] = r;
        j["test_time"] = r >= t.registers - t.test_time_registers;
    } else {
        const int p = token - t.patch_offset();
        j["kind"] = "patch";
        j["row"] = p / t.grid_w;
        j["col"] = p % t.grid_w;
    }
    return j;
}

nlohmann::json positions(const std::vector<int>& tokens, const Trace& t) {
    nlohmann::json out = nlohmann::json::array();
    for (int k : tokens) {
        const int p = k - t.patch_offset();
        out.push_back({p / t.grid_w, p % t.grid_w});
    }
    return out;
}

}  // namespace

nlohmann::json stats_json(const ImageStats& s, const ArtifactRules& rules, const Trace& t) {
    nlohmann::json layers = nlohmann::json::array(), heads = nlohmann::json::array();
    for (const auto& l : s.layers) {
        layers.push_back({
            {"layer", l.layer},
            {"norm_min", l.norm_min},
            {"norm_median", l.norm_median},
            {"norm_max", l.norm_max},
            {"norm_mad", l.norm_mad},
            {"max_inf_norm", l.max_inf_norm},
            {"kurtosis", l.kurtosis},
            {"cls_norm", l.cls_norm},
            {"register_norm_mean", l.register_norm_mean},
            {"artifacts_abs", l.artifacts_abs},
            {"artifact_fraction_abs", l.artifact_fraction_abs},
            {"artifact_positions_abs", positions(l.artifact_tokens_abs, t)},
            {"robust_threshold", l.robust_threshold},
            {"artifacts_robust", l.artifacts_robust},
            {"artifact_fraction_robust", l.artifact_fraction_robust},
            {"artifact_positions_robust", positions(l.artifact_tokens_robust, t)},
            {"artifacts_flagged", l.artifacts_flagged},
            {"artifact_fraction_flagged", l.artifact_fraction_flagged},
            {"artifact_positions_flagged", positions(l.artifact_tokens_flagged, t)},
            {"sink_rate", s.sink_rate(l.layer)},
        });
    }
    for (const auto& h : s.heads) {
        heads.push_back({
            {"layer", h.layer},
            {"head", h.head},
            {"top_key_mass", h.top_key_mass},
            {"top_key", token_json(h.top_key, t)},
            {"sinks", h.sinks},
            {"mean_abstention", h.mean_abstention},
            {"cls_on_registers", h.cls_on_registers},
        });
    }
    return {
        {"definitions",
         {{"token_norm", "L2 over channels of the residual stream after the block (pre final norm), patch tokens"},
          {"kurtosis", "mu4 / sigma^4 over all tokens x channels of the layer output; Pearson, not excess"},
          {"kurtosis_excess", false},
          {"artifacts_abs", "patch tokens with norm > norm_threshold"},
          {"artifacts_robust", "patch tokens with norm > median + mad_k * MAD (MAD unscaled)"},
          {"artifacts_flagged", "patch tokens the artifact_rule flags (outlined in the pictures)"},
          {"top_key_mass", "max over keys k of alpha_k = (1/N) sum_i A_ik"},
          {"sinks", "top_key_mass > sink_alpha (Gu et al.)"},
          {"sink_rate", "fraction of the layer's heads that sink"},
          {"mean_abstention", "mean over queries of 1 - sum_k A_ik"},
          {"cls_on_registers", "share of the CLS row's attention on register tokens"}}},
        {"norm_threshold", rules.norm_threshold},
        {"mad_k", rules.rule.mad_k},
        {"artifact_rule", rules.rule.to_json()},
        {"sink_alpha", rules.sink_alpha},
        {"grid", {t.grid_h, t.grid_w}},
        {"tokens", t.tokens},
        {"registers", t.registers},
        {"test_time_registers", t.test_time_registers},  // the last of the registers
        {"layers", layers},
        {"heads", heads},
    };
}

}  // namespace vitreg
