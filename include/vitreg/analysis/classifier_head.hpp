#pragma once
// A checkpoint's own classification head on the final-normed CLS token (`head.weight [C, D]`,
// `head.bias [C]`, as timm and vitreg's trained family store it), and the labels to score it
// against: what `vitreg study` reports as accuracy. The backbone loader ignores the head.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "vitreg/tensor_file.hpp"

namespace vitreg {

class ClassifierHead {
public:
    // The head stored in a checkpoint file, or nothing when it has none. With metadata
    // task=multilabel the head is multi-label (sigmoid > metadata `threshold`, default 0.5,
    // per class); otherwise single-label (the largest logit). Throws CheckpointError for a
    // head of the wrong shape.
    static std::optional<ClassifierHead> read(const TensorFile& checkpoint, int dim);

    int classes() const { return classes_; }
    bool multilabel() const { return multilabel_; }
    std::vector<float> logits(const float* cls) const;
    // Whether the head gets `label` right on this CLS token: a multi-hot list of `classes()`
    // (multi-label: every class must match) or a class index. Throws UsageError for a label of
    // the wrong form, naming `image`.
    bool correct(const float* cls, const nlohmann::json& label, const std::string& image) const;

private:
    int classes_ = 0, dim_ = 0;
    std::vector<float> weight_, bias_;
    bool multilabel_ = false;
    float threshold_ = 0.5f;
};

// A labels file: a JSON object from image file name (without folders) to its label. Throws
// IoError naming the file and the fault.
std::map<std::string, nlohmann::json> read_labels(const std::string& path);

}  // namespace vitreg
