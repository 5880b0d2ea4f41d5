#pragma once
// The property table of softmax, registers, softmax-1 and sinks, measured (docs/study.md; the
// work each row rests on: docs/design.md, "The study's property table"): how heads do nothing,
// what attention weights sum to, the added cost, massive activations, INT8 viability, window
// safety, retrofits, mass against the number of keys and the abstaining query, for any set of
// configurations on the same images. The result is study.json's content (a documented format
// other tools read), so C++, the command and Python see the same keys.
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/model.hpp"
#include "vitreg/precision.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/analysis/stats.hpp"

namespace vitreg {

// One configuration, as a recipe: the study loads its variants (fp32, int8, softmax-1, softmax,
// calibrated sinks) from the same checkpoint with the same intervention.
struct StudyConfig {
    std::string name;            // as shown in the report
    std::string path;            // the resolved checkpoint
    ConfigOverrides overrides;   // the attention it runs (unset: as trained), pos_interp, limits
    PrecisionOptions precision;
    Intervention intervention;

    // "MODEL[@KIND][@PRECISION][@evict=LIST][@ttr=K:NEURONS]" as `vitreg compare` takes it
    // (ModelSpec), named by its label. Throws for a bad checkpoint, contradictory precision
    // options or an intervention that does not fit, before any image runs.
    static StudyConfig parse(const std::string& text, const SafetensorsLimits& limits = {});
    Model load() const;  // the configuration itself
};

// Where the study's images come from: their names, and image i preprocessed for a model.
struct StudyImages {
    std::vector<std::string> names;
    std::function<Pixels(std::size_t image, const ResizeSpec& resize, const Config& config)> load;

    // Files decoded and preprocessed on demand (one at a time, nothing kept).
    static StudyImages files(const std::vector<std::string>& paths, const ImageLimits& limits = {});
};

struct StudyOptions {
    ResizeSpec resize;            // the main size
    std::vector<int> sizes;       // square sides for mass against the number of keys (empty: main size only)
    ArtifactRules rules;          // mad_k (artifact tokens), sink_alpha (a head dumps)
    float abstain = 0.5f;         // a head abstains when its mean abstention exceeds this
    std::string labels;           // labels file for head accuracy ("" = none)
    int timing_images = 8;        // ms/image over this many images (0: not timed, null)
    int threads = 0;
    std::int64_t max_tokens = kDefaultMaxTokens;
};

// Runs the study; `log` hears one line per stage. Throws UsageError / ImageError / IoError
// naming the configuration, image or size at fault, before anything is returned.
nlohmann::json run_study(const std::vector<StudyConfig>& configs, const StudyImages& images, const StudyOptions& options,
                         const std::function<void(const std::string&)>& log = {});

// The keys of each configuration's "summary", in study.csv's column order.
const std::vector<std::string>& study_summary_columns();
// study.csv: a header, then one row per configuration (empty cell for null).
std::string study_csv(const nlohmann::json& study);

}  // namespace vitreg
