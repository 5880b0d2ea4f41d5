#include "vitreg/analysis/evaluation.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "vitreg/analysis/eval_data.hpp"
#include "vitreg/analysis/inspect.hpp"
#include "vitreg/analysis/linear_probe.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string alpha_column(double a) {
    std::ostringstream s;
    s << "pck@" << std::fixed << std::setprecision(2) << a;
    return s.str();
}

nlohmann::json resize_json(const EvalOptions& o) { return o.resize.to_string(); }

// Where the model's input sits in the source image: what maps patches back to its pixels.
nlohmann::json geometry_json(const Geometry& g) {
    return {{"source", {g.source_width, g.source_height}}, {"resized", {g.resized_width, g.resized_height}},
            {"crop", {g.crop_left, g.crop_top}}, {"input", {g.width, g.height}}};
}

}  // namespace

nlohmann::json to_json(const EvalTable& t) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t k = 0; k < t.configs.size(); ++k) {
        nlohmann::json row = {{"config", t.configs[k]}};
        for (std::size_t c = 0; c < t.columns.size(); ++c) row[t.columns[c]] = number(t.values[k][c]);
        rows.push_back(row);
    }
    return {{"format", "vitreg-eval"}, {"version", 1}, {"task", t.task}, {"protocol", t.protocol},
            {"columns", t.columns}, {"rows", rows}, {"details", t.details}};
}

std::string eval_csv(const EvalTable& t) {
    std::ostringstream s;
    s << "config";
    for (const auto& c : t.columns) s << "," << c;
    s << "\n" << std::setprecision(9);
    for (std::size_t k = 0; k < t.configs.size(); ++k) {
        s << '"' << t.configs[k] << '"';
        for (double v : t.values[k]) {
            s << ",";
            if (std::isfinite(v)) s << v;
        }
        s << "\n";
    }
    return s.str();
}

CorrespondenceEval evaluate_correspondence(const std::vector<LabelledModel>& configs, const std::vector<CorrespondencePair>& pairs,
                                           const CorrespondenceOptions& options) {
    if (pairs.empty()) throw UsageError("eval correspondence: no image pair given");
    CorrespondenceEval r;
    r.pairs = pairs;
    std::vector<PairGeometry> truths;
    nlohmann::json data = nlohmann::json::array();
    for (const auto& p : pairs) {
        truths.push_back(read_pair_geometry(p.truth));
        data.push_back({{"first", p.first}, {"second", p.second}, {"truth", p.truth},
                        {"kind", truths.back().kind == PairGeometry::Kind::Homography ? "homography" : "disparity"}});
    }
    r.table.task = "correspondence";
    r.table.protocol = {{"data", data}, {"split", "none: every pair is scored"}, {"seed", nullptr},
                        {"parameters", {{"features", "final-normed patch tokens"}, {"matching", "mutual nearest neighbours by cosine"},
                                        {"alphas", options.alphas}, {"threshold", "alpha * max(H, W) of the second image, in its pixels"},
                                        {"scored", "matches whose true location is known and lies inside the second image"},
                                        {"resize", resize_json(options)}}}};
    for (double a : options.alphas) r.table.columns.push_back(alpha_column(a));
    r.table.columns.push_back("matches");
    r.table.columns.push_back("scored");
    for (const auto& cfg : configs) {
        const Config& c = cfg.model.config();
        std::vector<CorrespondenceScore> scores;
        std::vector<double> row(r.table.columns.size(), 0.0);
        nlohmann::json per_pair = nlohmann::json::array();
        for (std::size_t i = 0; i < pairs.size(); ++i) {
            const Inspection a = inspect(cfg.model, pairs[i].first, options.resize, Probe{}, options.threads);
            const Inspection b = inspect(cfg.model, pairs[i].second, options.resize, Probe{}, options.threads);
            CorrespondenceScore s;
            try {
                s = score_correspondence(a.features, a.geometry, b.features, b.geometry, c.patch, truths[i], options.alphas);
            } catch (const UsageError& e) {
                throw UsageError(pairs[i].first + ": " + e.what());
            }
            for (std::size_t k = 0; k < s.pck.size(); ++k) row[k] += s.pck[k] / pairs.size();
            row[s.pck.size()] += static_cast<double>(s.matches) / pairs.size();
            row[s.pck.size() + 1] += static_cast<double>(s.scored) / pairs.size();
            nlohmann::json pj = {{"first", pairs[i].first}, {"matches", s.matches}, {"scored", s.scored}, {"geometry_first", geometry_json(a.geometry)},
                                 {"geometry_second", geometry_json(b.geometry)}};
            for (std::size_t k = 0; k < s.pck.size(); ++k) pj[alpha_column(options.alphas[k])] = s.pck[k];
            per_pair.push_back(pj);
            scores.push_back(std::move(s));
        }
        r.table.configs.push_back(cfg.label);
        r.table.values.push_back(row);
        r.table.details.push_back({{"config", cfg.label}, {"pairs", per_pair}});
        r.scores.push_back(std::move(scores));
    }
    return r;
}

EvalTable evaluate_segmentation(const std::vector<LabelledModel>& configs, const std::string& images, const std::string& masks,
                                const SegmentationOptions& options) {
    const auto samples = read_segmentation_folder(images, masks);
    const std::size_t n_train = std::clamp<std::size_t>(static_cast<std::size_t>(std::lround(options.train_fraction * samples.size())), 1,
                                                        samples.size() - 1);
    std::vector<LabelMask> label_masks;
    for (const auto& s : samples) label_masks.push_back(read_label_mask(s.mask));
    EvalTable t;
    t.task = "segmentation";
    nlohmann::json train = nlohmann::json::array(), test = nlohmann::json::array();
    for (std::size_t i = 0; i < samples.size(); ++i) (i < n_train ? train : test).push_back(samples[i].image);
    const DenseKnnOptions& k = options.knn;
    t.protocol = {{"data", {{"images", images}, {"masks", masks}}},
                  {"split", {{"rule", "the first train_fraction of the images sorted by name learn, the rest are scored"},
                             {"train_fraction", options.train_fraction}, {"train", train}, {"test", test}}},
                  {"seed", k.seed},
                  {"parameters", {{"features", "final-normed patch tokens"},
                                  {"patch_labels", "majority of the mask's labels per patch, 255 ignored"},
                                  {"knn", {{"k", k.vote.k}, {"temperature", k.vote.temperature}, {"similarity", "cosine"},
                                           {"memory_per_image", k.memory_per_image}, {"max_memory", k.max_memory},
                                           {"draw", "splitmix64 partial Fisher-Yates over each training image's labelled patches"}}},
                                  {"linear", {{"ridge", options.ridge}, {"classes", "weighted alike"}}},
                                  {"resize", resize_json(options)}}}};
    t.columns = {"knn_miou", "linear_miou", "knn_accuracy", "linear_accuracy", "memory", "test_patches"};
    for (const auto& cfg : configs) {
        const Config& c = cfg.model.config();
        std::vector<LabelledPatches> train_set, test_set;
        nlohmann::json geometries = nlohmann::json::array();
        int classes = 1;
        for (std::size_t i = 0; i < samples.size(); ++i) {
            const Inspection in = inspect(cfg.model, samples[i].image, options.resize, Probe{}, options.threads);
            LabelledPatches s;
            try {
                s.labels = patch_majority_labels(label_masks[i], in.geometry, c.patch, in.features.grid_h, in.features.grid_w);
            } catch (const UsageError& e) {
                throw UsageError(samples[i].mask + ": " + e.what());
            }
            s.features.assign(in.features.patches_of(0), in.features.patches_of(0) + in.features.patches.size());
            for (int l : s.labels) classes = std::max(classes, l + 1);
            geometries.push_back(geometry_json(in.geometry));
            (i < n_train ? train_set : test_set).push_back(std::move(s));
        }
        const DenseKnnResult knn = dense_knn_segmentation(train_set, test_set, c.dim, classes, options.knn);
        const LinearProbeResult lin = linear_probe(train_set, test_set, c.dim, classes, options.ridge);
        t.configs.push_back(cfg.label);
        t.values.push_back({knn.scores.miou, lin.miou, knn.scores.accuracy, lin.accuracy, static_cast<double>(knn.memory),
                            static_cast<double>(knn.test_patches)});
        nlohmann::json knn_iou = nlohmann::json::array(), lin_iou = nlohmann::json::array();
        for (double v : knn.scores.iou) knn_iou.push_back(number(v));
        for (double v : lin.iou) lin_iou.push_back(number(v));
        t.details.push_back({{"config", cfg.label}, {"classes", classes}, {"knn_iou", knn_iou}, {"linear_iou", lin_iou},
                             {"geometry", geometries}});
    }
    return t;
}

EvalTable evaluate_knn(const std::vector<LabelledModel>& configs, const std::string& dir, const KnnOptions& options) {
    if (options.feature != "cls" && options.feature != "pooled")
        throw UsageError("--feature: expected cls or pooled, got '" + options.feature + "'");
    const ClassFolders data = read_class_folders(dir);
    EvalTable t;
    t.task = "knn";
    t.protocol = {{"data", {{"folder", dir}, {"classes", data.classes}, {"images", data.images.size()}}},
                  {"split", "leave-one-out: each image is classified by all the others"},
                  {"seed", nullptr},
                  {"parameters", {{"features", options.feature}, {"k", options.vote.k}, {"temperature", options.vote.temperature},
                                  {"similarity", "cosine"}, {"vote", "exp(cos / temperature) summed per class"},
                                  {"resize", resize_json(options)}}}};
    t.columns = {"accuracy"};
    for (const auto& cls : data.classes) t.columns.push_back("accuracy:" + cls);
    for (const auto& cfg : configs) {
        const int dim = cfg.model.config().dim;
        std::vector<float> features;
        for (const auto& path : data.images) {
            const Inspection in = inspect(cfg.model, path, options.resize, Probe{}, options.threads);
            const std::vector<float> f = options.feature == "cls" ? std::vector<float>(in.features.cls_of(0), in.features.cls_of(0) + dim)
                                                                  : in.features.pooled_of(0);
            features.insert(features.end(), f.begin(), f.end());
        }
        const KnnAccuracy r = knn_accuracy(features, data.labels, dim, static_cast<int>(data.classes.size()), options.vote);
        std::vector<double> row = {r.accuracy};
        row.insert(row.end(), r.class_accuracy.begin(), r.class_accuracy.end());
        t.configs.push_back(cfg.label);
        t.values.push_back(row);
        t.details.push_back({{"config", cfg.label}, {"predicted", r.predicted}});
    }
    return t;
}

}  // namespace vitreg
