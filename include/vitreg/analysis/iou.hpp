#pragma once
// Intersection over union of predicted labels against true ones: what every segmentation score
// (the linear probe, the dense k-NN) reports.
#include <vector>

namespace vitreg {

struct IouScores {
    std::vector<double> iou;  // per class; NaN where the class appears in neither truth nor prediction
    double miou = 0;          // mean over the classes that appear
    double accuracy = 0;      // share of the labels predicted right
};

// truth[i] < 0 is ignored; predictions outside [0, classes) count against the true class only.
IouScores iou_scores(const std::vector<int>& truth, const std::vector<int>& predicted, int classes);

}  // namespace vitreg
