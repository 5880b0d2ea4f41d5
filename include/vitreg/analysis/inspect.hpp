#pragma once
// One image through one model with a probe: what `vitreg maps`, `vitreg compare` and the
// viewer start from.
#include <string>

#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/probe.hpp"
#include "vitreg/analysis/stats.hpp"

#include <nlohmann/json_fwd.hpp>

namespace vitreg {

struct Inspection {
    std::string image_path;
    Pixels pixels;
    Geometry geometry;
    Features features;
    Trace trace;
};

// Decodes and preprocesses `image_path` for `model`, runs the forward with `probe`.
// Throws ImageError / UsageError naming the image and the fault.
Inspection inspect(const Model& model, const std::string& image_path, const ResizeSpec& resize, const Probe& probe,
                   int threads = 0);

// stats.json's content for one image: the rules used, per-layer and per-head statistics.
nlohmann::json stats_json(const ImageStats& stats, const ArtifactRules& rules, const Trace& trace);

}  // namespace vitreg
