#pragma once
// The dense keywords Model.dense and vitreg.dense share (layers, view, upsampling, dtype).
#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/dense.hpp"

namespace vitreg::python {

// Takes layers, norm, concat, upsample, window, stride, scales, flip, grid, jbu_sigma_spatial,
// jbu_sigma_range, jbu_radius, dtype and pca_dims from `o` into `d`; throws UsageError for a bad one.
void take_dense_options(Options& o, DenseOptions& d);

// The keywords take_dense_options reads, with their defaults, for def_with_keywords.
inline std::array<Keyword, 14> dense_keywords() {
    const DenseOptions d;
    return keywords(Keyword{"layers", py::str("last")}, Keyword{"norm", py::bool_(false)},
                    Keyword{"concat", py::bool_(false)}, Keyword{"upsample", py::str("none")},
                    Keyword{"window", py::int_(0)}, Keyword{"stride", py::int_(0)}, Keyword{"scales"},
                    Keyword{"flip", py::bool_(false)}, Keyword{"grid"},
                    Keyword{"jbu_sigma_spatial", py::float_(d.jbu.sigma_spatial)},
                    Keyword{"jbu_sigma_range", py::float_(d.jbu.sigma_range)},
                    Keyword{"jbu_radius", py::int_(d.jbu.radius)}, Keyword{"dtype", py::str("f32")},
                    Keyword{"pca_dims", py::int_(0)});
}

}  // namespace vitreg::python
