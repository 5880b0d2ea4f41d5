#pragma once
// The dense keywords Model.dense and vitreg.dense share (layers, view, upsampling, dtype).
#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/dense.hpp"

namespace vitreg::python {

// Takes layers, norm, concat, upsample, window, stride, scales, flip, grid, jbu_sigma_spatial,
// jbu_sigma_range, jbu_radius and dtype from `o` into `d`; throws UsageError for a bad one.
void take_dense_options(Options& o, DenseOptions& d);

}  // namespace vitreg::python
