// vitreg.compare: `vitreg compare` without the pictures, its stats.json as a dict.
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/analysis/compare.hpp"

namespace vitreg::python {

namespace {

using namespace pybind11::literals;

py::object compare(const py::object& models, const py::object& images, Options& o) {
    CompareOptions options;
    options.resize = take_pixel_spec(o);
    options.rules.norm_threshold = o.take<float>("norm_threshold", options.rules.norm_threshold);
    options.rules.rule = take_artifact_rule(o);
    options.threads = o.take<int>("threads", 0);
    o.finish();
    const std::vector<LabelledModel> configs = labelled_models(models);
    const auto paths = input_list(images);
    std::string text;
    {
        py::gil_scoped_release release;
        text = to_json(vitreg::compare(configs, paths, options)).dump();
    }
    return py::module_::import("json").attr("loads")(text);
}

}  // namespace

void bind_compare(py::module_& m) {
    const CompareOptions defaults;
    def_with_keywords(m, "compare", &compare, {"models", "images"},
                      keywords(Keyword{"norm_threshold", decimal(defaults.rules.norm_threshold)}) +
                          artifact_rule_keywords() + pixel_keywords() + keywords(Keyword{"threads", py::int_(0)}),
                      R"(The statistics of `vitreg compare`: the same images through several configurations.

models          vitreg.Model objects, or names as the command takes them ('MODEL@softmax1@bf16', '@evict=sink', ...).
images          files, folders or '@list.txt', or a list of them.
norm_threshold  the absolute artifact rule: patch norm > norm_threshold.
mad_k           the model-free rule: patch norm (or |cos|) > median + mad_k * MAD.
artifact_rule   which patches are artifacts: 'norm', 'direction' (|cos| with the layer's defect
                direction an outlier) or 'both'; defects: a file of vitreg.defects / `vitreg defects`
                (default: computed from each model's weights with defect_samples, defect_seed).
Returns stats.json as a dict: "rows" holds one dict per image and configuration (image-major) with
the output layer's statistics and "per_layer"; "summary" their mean and sd over the images per
configuration, the best marked.)");
}

}  // namespace vitreg::python
