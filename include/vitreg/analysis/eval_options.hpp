#pragma once
// The options of `vitreg eval segmentation|knn` and vitreg.eval_segmentation / eval_knn
// (option_spec.hpp), beside the pixel table; the correspondence's --alphas stays a list of its own.
#include "vitreg/analysis/evaluation.hpp"
#include "vitreg/option_spec.hpp"

namespace vitreg {

const OptionTable<SegmentationOptions, 7>& segmentation_option_table();
const OptionTable<KnnOptions, 3>& knn_option_table();

}  // namespace vitreg
