// vitreg.eval_correspondence / eval_segmentation / eval_knn: `vitreg eval` without the pictures,
// its eval.json as a dict.
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/analysis/eval_options.hpp"

namespace vitreg::python {

namespace {

using namespace pybind11::literals;

// The options every evaluation takes, and the call with the GIL released, its table as a dict.
template <class Run>
py::object run_eval(Options& o, EvalOptions& options, Run run) {
    options.resize = take_pixel_spec(o, options.resize);
    options.threads = o.take<int>("threads", 0);
    o.finish();
    std::string text;
    {
        py::gil_scoped_release release;
        text = to_json(run()).dump();
    }
    return py::module_::import("json").attr("loads")(text);
}

py::object eval_correspondence(const py::object& models, const py::object& pairs, Options& o) {
    CorrespondenceOptions options;
    options.alphas = o.take<std::vector<double>>("alphas", options.alphas);
    std::vector<CorrespondencePair> list;
    for (const auto& item : pairs) {
        const py::sequence p = py::reinterpret_borrow<py::sequence>(item);
        if (p.size() != 3) throw UsageError("eval_correspondence: each pair is (first, second, truth)");
        list.push_back({path_of(p[0]), path_of(p[1]), path_of(p[2])});
    }
    const std::vector<LabelledModel> configs = labelled_models(models);
    return run_eval(o, options, [&] { return evaluate_correspondence(configs, list, options).table; });
}

py::object eval_segmentation(const py::object& models, const py::object& images, const py::object& masks, Options& o) {
    SegmentationOptions options;
    take_table(o, segmentation_option_table(), options);
    const std::vector<LabelledModel> configs = labelled_models(models);
    const std::string image_dir = path_of(images), mask_dir = path_of(masks);
    return run_eval(o, options, [&] { return evaluate_segmentation(configs, image_dir, mask_dir, options); });
}

py::object eval_knn(const py::object& models, const py::object& images, Options& o) {
    KnnOptions options;
    take_table(o, knn_option_table(), options);
    const std::vector<LabelledModel> configs = labelled_models(models);
    const std::string dir = path_of(images);
    return run_eval(o, options, [&] { return evaluate_knn(configs, dir, options); });
}

}  // namespace

void bind_eval(py::module_& m) {
    const auto threads = keywords(Keyword{"threads", py::int_(0)});
    const CorrespondenceOptions corr;
    def_with_keywords(m, "eval_correspondence", &eval_correspondence, {"models", "pairs"},
                      keywords(Keyword{"alphas", py::cast(corr.alphas)}) + pixel_keywords(corr.resize) + threads,
                      R"(`vitreg eval correspondence`: PCK of mutual nearest neighbours between two views with known geometry.

models  vitreg.Model objects, or names as the command takes them ('MODEL@softmax1', ...).
pairs   (first, second, truth) per pair: truth a homography (OpenCV XML or 9 numbers of text) or the
        first view's disparity map (greyscale PNG, or an .npz such as skimage's motorcycle_disp.npz).
Returns eval.json as a dict: "rows" one per configuration (pck@0.05, ..., matches, scored),
"protocol" the data and parameters, "details" per pair.)");
    const SegmentationOptions seg;
    def_with_keywords(m, "eval_segmentation", &eval_segmentation, {"models", "images", "masks"},
                      table_keywords(segmentation_option_table(), seg) + pixel_keywords(seg.resize) + threads,
                      R"(`vitreg eval segmentation`: mIoU of a dense k-NN (Hummingbird) and of a linear probe on patch features.

images, masks  folders: each image has masks/<stem>.png (palette or greyscale labels, 255 ignored).
Returns eval.json as a dict (knn_miou, linear_miou, knn_accuracy, linear_accuracy, memory, test_patches).)");
    const KnnOptions knn;
    def_with_keywords(m, "eval_knn", &eval_knn, {"models", "images"},
                      table_keywords(knn_option_table(), knn) + pixel_keywords(knn.resize) + threads,
                      R"(`vitreg eval knn`: leave-one-out k-NN accuracy over a folder of class subfolders.

feature  'cls' or 'pooled'. Returns eval.json as a dict (accuracy, accuracy:<class> per class).)");
}

}  // namespace vitreg::python
