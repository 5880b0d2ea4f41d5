#pragma once
// The options of `vitreg dense` and vitreg.dense / Model.dense (option_spec.hpp), beside the pixel
// and batch tables; --pca, --pca-joint, --pca-mask and the artifact rule are the front ends' own
// (their values change with one another).
#include "vitreg/dense.hpp"
#include "vitreg/option_spec.hpp"

namespace vitreg {

const OptionTable<DenseOptions, 14>& dense_option_table();

}  // namespace vitreg
