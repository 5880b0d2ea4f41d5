#pragma once
// `vitreg eval` as library calls (docs/design.md, "Repairs and dense evaluation"): several
// configurations on one data set, one table row per configuration, with the protocol (data,
// split, seed, parameters) stated beside the numbers. Everything is computed before anything is
// returned: a file that does not fit throws, naming it, and nothing is written.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vitreg/analysis/correspondence.hpp"
#include "vitreg/analysis/dense_knn.hpp"
#include "vitreg/analysis/knn_accuracy.hpp"
#include "vitreg/labelled_model.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg {

struct EvalOptions {
    ResizeSpec resize = ResizeSpec::parse("long:448");  // the whole image, not the eval crop
    int threads = 0;                                      // 0 = all cores
};

// One evaluation: one row per configuration.
struct EvalTable {
    std::string task;                          // "correspondence" | "segmentation" | "knn"
    nlohmann::json protocol;                   // data, split, seed, parameters
    std::vector<std::string> configs, columns;
    std::vector<std::vector<double>> values;   // [configuration][column]
    nlohmann::json details = nlohmann::json::array();  // per configuration: per pair / per class
};

// {"format": "vitreg-eval", "task", "protocol", "columns", "rows": [{"config", column: value...}], "details"}
nlohmann::json to_json(const EvalTable& table);
// config,column... one line per configuration.
std::string eval_csv(const EvalTable& table);

struct CorrespondencePair {
    std::string first, second, truth;  // two views and their geometry (read_pair_geometry)
};
struct CorrespondenceOptions : EvalOptions {
    std::vector<double> alphas{0.05, 0.10, 0.15};
};
struct CorrespondenceEval {
    EvalTable table;  // pck@α averaged over the pairs, matches and scored matches per pair
    std::vector<CorrespondencePair> pairs;
    std::vector<std::vector<CorrespondenceScore>> scores;  // [configuration][pair]: the matches, for pictures
};
CorrespondenceEval evaluate_correspondence(const std::vector<LabelledModel>& configs, const std::vector<CorrespondencePair>& pairs,
                                           const CorrespondenceOptions& options);

struct SegmentationOptions : EvalOptions {
    double train_fraction = 0.5;  // the first part of the images sorted by name is the memory / the probe's fit
    DenseKnnOptions knn;
    double ridge = 1.0;           // the linear probe's (linear_probe)
};
// knn_miou, linear_miou, knn_accuracy, linear_accuracy, memory over the folder (read_segmentation_folder).
EvalTable evaluate_segmentation(const std::vector<LabelledModel>& configs, const std::string& images, const std::string& masks,
                                const SegmentationOptions& options);

struct KnnOptions : EvalOptions {
    KnnOptions() { resize = ResizeSpec::parse("eval"); }
    KnnVote vote;
    std::string feature = "cls";  // "cls" | "pooled"
};
// Leave-one-out accuracy over a folder of class subfolders (read_class_folders).
EvalTable evaluate_knn(const std::vector<LabelledModel>& configs, const std::string& dir, const KnnOptions& options);

}  // namespace vitreg
