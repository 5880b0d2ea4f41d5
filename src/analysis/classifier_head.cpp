#include "vitreg/analysis/classifier_head.hpp"

#include <cmath>

#include "core/json_limits.hpp"
#include "vitreg/error.hpp"
#include "core/parse_number.hpp"
#include "core/safetensors.hpp"

namespace vitreg {

std::optional<ClassifierHead> ClassifierHead::read(const TensorFile& file, int dim) {
    const std::string& checkpoint = file.path();
    if (!file.has("head.weight") || !file.has("head.bias")) return std::nullopt;
    const TensorView& w = file.get("head.weight");
    const TensorView& b = file.get("head.bias");
    if (w.shape.size() != 2 || w.shape[1] != dim || b.shape.size() != 1 || b.shape[0] != w.shape[0] || w.shape[0] < 1)
        throw CheckpointError(checkpoint + ": head.weight " + w.shape_string() + " and head.bias " + b.shape_string() +
                              " are not a head on " + std::to_string(dim) + " channels");
    ClassifierHead h;
    h.classes_ = static_cast<int>(w.shape[0]);
    h.dim_ = dim;
    h.weight_ = w.to_float();
    h.bias_ = b.to_float();
    const auto& meta = file.metadata();
    const auto task = meta.find("task");
    h.multilabel_ = task != meta.end() && task->second == "multilabel";
    if (const auto t = meta.find("threshold"); t != meta.end()) {
        const auto v = parse_real(t->second, 0.0, 1.0);
        if (!v) throw CheckpointError(checkpoint + ": metadata threshold '" + t->second + "' is not in [0, 1]");
        h.threshold_ = static_cast<float>(*v);
    }
    return h;
}

std::vector<float> ClassifierHead::logits(const float* cls) const {
    std::vector<float> out(bias_);
    for (int c = 0; c < classes_; ++c) {
        double acc = 0;
        for (int d = 0; d < dim_; ++d) acc += static_cast<double>(weight_[static_cast<std::size_t>(c) * dim_ + d]) * cls[d];
        out[c] += static_cast<float>(acc);
    }
    return out;
}

bool ClassifierHead::correct(const float* cls, const nlohmann::json& label, const std::string& image) const {
    const auto z = logits(cls);
    if (multilabel_) {
        if (!label.is_array() || static_cast<int>(label.size()) != classes_)
            throw UsageError("the label of " + image + " is not a multi-hot list of " + std::to_string(classes_) + " classes");
        for (int c = 0; c < classes_; ++c) {
            if (!label[c].is_number()) throw UsageError("the label of " + image + " holds a non-number");
            const bool predicted = 1.0 / (1.0 + std::exp(-static_cast<double>(z[c]))) > threshold_;
            if (predicted != (label[c].get<double>() > 0.5)) return false;
        }
        return true;
    }
    if (!label.is_number_integer() || label.get<long long>() < 0 || label.get<long long>() >= classes_)
        throw UsageError("the label of " + image + " is not a class index below " + std::to_string(classes_));
    int best = 0;
    for (int c = 1; c < classes_; ++c)
        if (z[c] > z[best]) best = c;
    return best == label.get<int>();
}

std::map<std::string, nlohmann::json> read_labels(const std::string& path) {
    const nlohmann::json j = read_json_file(path, "labels file");
    if (!j.is_object()) throw IoError(path + ": not a vitreg labels file: expected an object from image file name to label");
    std::map<std::string, nlohmann::json> labels;
    for (auto it = j.begin(); it != j.end(); ++it) labels[it.key()] = it.value();
    return labels;
}

}  // namespace vitreg
