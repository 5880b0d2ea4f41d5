#pragma once
// The pieces of the `vitreg` Python module, one binder per concept (errors, the model, the batch
// jobs, images), and the model handle they share.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>

#include <cstdint>
#include <string>
#include <vector>

#include "vitreg/image.hpp"
#include "vitreg/labelled_model.hpp"
#include "vitreg/model.hpp"

namespace vitreg::python {

namespace py = pybind11;

// vitreg.Model: a loaded checkpoint and the defaults its calls run with.
struct PyModel {
    Model model;
    int threads = 0;                              // for forward / trace / the batch jobs (0 = all cores)
    std::int64_t max_tokens = kDefaultMaxTokens;  // per image
    ImageLimits image_limits;
};

// Model.preprocess: a path or uint8 image as the model's float32 input [3, H, W].
py::array_t<float> preprocess_image(const PyModel& self, const py::object& image, const std::string& resize,
                                    const std::optional<std::string>& pipeline, const std::string& resample,
                                    const std::string& decode, bool exif_transpose);
// Model.dense: one image's dense array, as `vitreg dense` writes it.
py::object model_dense(const PyModel& self, const py::object& image, const py::kwargs& kwargs);

// vitreg.Error and its subclasses; vitreg's C++ exceptions arrive as them.
void bind_errors(py::module_& m);
// vitreg.Model.
void bind_model(py::module_& m);
// vitreg.extract, vitreg.dense, vitreg.merge, vitreg.study.
void bind_jobs(py::module_& m);
// vitreg.read_image.
void bind_images(py::module_& m);
// vitreg.explore and vitreg.ExplorePage.
void bind_explore(py::module_& m);
// vitreg.compare.
void bind_compare(py::module_& m);
// vitreg.eval_correspondence, vitreg.eval_segmentation, vitreg.eval_knn.
void bind_eval(py::module_& m);
// vitreg.defects.
void bind_defects(py::module_& m);
// vitreg.maps.
void bind_maps(py::module_& m);
// vitreg.index, vitreg.Index, vitreg.search (search.cpp).
void bind_search(py::module_& m);
// vitreg._option_table (option_tables.cpp).
void bind_option_tables(py::module_& m);

// The configurations of vitreg.explore and vitreg.compare: vitreg.Model objects or names as the
// command line gives them ("MODEL@softmax1@bf16"), one or a list, labelled as the commands label
// them; `limits` (when given) gets the image limits of the last vitreg.Model among them.
std::vector<LabelledModel> labelled_models(const py::object& models, ImageLimits* limits = nullptr);

}  // namespace vitreg::python
