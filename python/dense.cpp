// Model.dense and the options vitreg.dense shares with it: the dense view and upsampling keywords.
#include "dense_options.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "arrays.hpp"
#include "vitreg/dense.hpp"
#include "vitreg/error.hpp"

namespace vitreg::python {

py::object model_dense(const PyModel& self, const py::object& image, const py::kwargs& kwargs) {
    Options o("dense", kwargs);
    DenseOptions d;
    take_dense_options(o, d);
    const auto resize = o.take<std::string>("resize", "eval");
    const int threads = o.take<int>("threads", self.threads);
    o.finish();
    if (threads < 0) throw UsageError("threads must be 0 (all cores) or more, got " + std::to_string(threads));
    d.threads = threads;
    d.max_tokens = self.max_tokens;
    const Config& c = self.model.config();
    d.check(c);
    Pixels px;
    const bool path = py::isinstance<py::str>(image) || py::hasattr(image, "__fspath__");
    if (!path && shared_array(image).dtype().kind() == 'f') {
        // Pixels already preprocessed, as forward takes them (any float array-like), one image;
        // anything else is an image to preprocess (a file, or uint8 pixels).
        const Batch b = checked_batch(image);
        if (b.batch != 1) throw UsageError("image: dense takes one image, got a batch of " + std::to_string(b.batch));
        px.height = b.height;
        px.width = b.width;
        px.chw.assign(b.data, b.data + 3 * static_cast<std::size_t>(b.height) * b.width);
    } else {
        const py::array_t<float> pre = preprocess_image(self, image, resize, std::nullopt, "pil", "exact", false);
        px.height = static_cast<int>(pre.shape(1));
        px.width = static_cast<int>(pre.shape(2));
        px.chw.assign(pre.data(), pre.data() + pre.size());
    }
    DenseArray a;
    {
        py::gil_scoped_release release;
        a = dense_array(self.model, px, d);
    }
    const std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
    // float16 as the file stores it: the half bits, viewed as numpy's float16 without a copy.
    py::array out = d.half ? py::array(owning_array(std::move(a.half), shape).attr("view")("float16"))
                           : py::array(owning_array(std::move(a.data), shape));
    if (d.pca_dims == 0) return std::move(out);
    py::dict basis;  // what <row>.pca_basis.safetensors holds
    for (auto& [name, t] : pca_basis_tensors(a.basis))
        basis[py::str(name)] = owning_array(std::move(t.values), std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
    return py::make_tuple(out, basis);
}

}  // namespace vitreg::python
