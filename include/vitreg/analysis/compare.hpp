#pragma once
// `vitreg compare` as a library call: the same images through several configurations, the
// artifact statistics of each image under each, and their summary over the images per
// configuration with the best marked. Numbers only (no OpenCV): the command and the render
// layer draw the pictures from the result's traces.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "vitreg/analysis/column_summary.hpp"
#include "vitreg/analysis/inspect.hpp"
#include "vitreg/labelled_model.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/analysis/stats.hpp"

namespace vitreg {

// What `vitreg compare` takes besides the models and images: --resize and the pixel pipeline,
// --norm-threshold, --mad-k and the artifact rule (--artifact-rule, --defects), --threads.
struct CompareOptions {
    ResizeSpec resize;
    ArtifactRules rules;
    int threads = 0;  // 0 = all cores
};

// stats.csv's row of one image under one configuration: (column, value as written).
using StatsRow = std::vector<std::pair<std::string, std::string>>;

// One image under one configuration.
struct CompareCell {
    Inspection inspection;  // its pixels and trace (Probe::statistics): what the pictures show
    ImageStats stats;       // every layer and head: stats.json's "per_layer"
    StatsRow row;           // the output layer's statistics: a row of stats.csv
    // The artifact outlines: the output layer's patches the artifact rule flags (token indices, CLS = 0).
    const std::vector<int>& outlined() const { return stats.layers.back().artifact_tokens_flagged; }
};

struct CompareResult {
    std::vector<LabelledModel> configs;
    std::vector<std::string> images;
    ArtifactRules rules;
    std::vector<std::vector<CompareCell>> cells;  // [image][configuration]
    // Per numeric column of the rows (those after "grid"), per configuration: mean and sample sd
    // over the images and, on the artifact-related columns, the best configurations marked.
    std::vector<ColumnSummary> summary;
};

// Runs every image through every configuration. Everything is computed before anything is
// returned: a bad image throws (ImageError / UsageError naming it) and leaves no result.
CompareResult compare(const std::vector<LabelledModel>& configs, const std::vector<std::string>& images,
                      const CompareOptions& options);

// stats.json: the rules, the summary and one row per cell (image-major) with its per-layer statistics.
nlohmann::json to_json(const CompareResult& result);
// stats.csv: a header, then one row per cell (image-major).
std::string stats_csv(const CompareResult& result);
// The summary as an aligned plain-text table: one line per statistic, one column per
// configuration (numbered, the labels listed above), "*" on the best.
std::string summary_text(const CompareResult& result);

}  // namespace vitreg
