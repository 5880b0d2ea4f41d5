#pragma once
// A per-patch linear classifier (ridge regression onto one-hot labels) fitted on dense
// features of images with known masks, scored by intersection over union.
#include <cstdint>
#include <vector>

namespace vitreg {

struct LabelledPatches {
    std::vector<float> features;  // [patches, dim]
    std::vector<int> labels;       // [patches]; -1 = ignore
};

// The majority label of each patch-sized cell of an 8-bit label mask [height, width].
std::vector<int> patch_labels(const std::uint8_t* mask, int width, int height, int patch);

struct LinearProbeResult {
    std::vector<double> iou;  // per class; NaN where the class appears in neither truth nor prediction
    double miou = 0;          // mean over classes that appear
    double accuracy = 0;      // fraction of test patches labelled right
    int train_patches = 0, test_patches = 0;
};

// Standardizes features on the training set, fits W = (XᵀSX + λI)⁻¹XᵀSY with a bias column and
// S weighting every class alike (background would otherwise swamp small objects), predicts
// argmax on the test set.
LinearProbeResult linear_probe(const std::vector<LabelledPatches>& train, const std::vector<LabelledPatches>& test, int dim,
                               int classes, double ridge = 1.0);

}  // namespace vitreg
