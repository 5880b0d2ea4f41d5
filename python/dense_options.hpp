#pragma once
// The dense keywords Model.dense and vitreg.dense share (layers, view, upsampling, dtype).
#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/dense_options.hpp"

namespace vitreg::python {

// The keywords of dense_option_table() (layers, view, upsampling, dtype, pca_dims), with their defaults.
inline auto dense_keywords() { return table_keywords(dense_option_table()); }

// Takes them from `o` into `d`; throws UsageError for a bad one.
inline void take_dense_options(Options& o, DenseOptions& d) { take_table(o, dense_option_table(), d); }

}  // namespace vitreg::python
