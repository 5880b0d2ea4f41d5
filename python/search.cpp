// vitreg.index, vitreg.Index and vitreg.search: `vitreg index` and `vitreg search` from Python.
// Queries are read where they lie (shared_array) and the results are arrays that own their
// buffers (owning_array): nothing is copied on either side.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/error.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg::python {

namespace {

using namespace pybind11::literals;

py::object from_json(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

py::dict build(const py::object& features, const py::object& out, Options& o) {
    IndexOptions io;
    take_table(o, index_option_table(), io);
    o.finish();
    const std::string folder = path_of(features), to = path_of(out);
    IndexReport r;
    {
        py::gil_scoped_release release;
        r = build_index(read_feature_source(folder, io.feature), to, io);
    }
    return py::dict("factory"_a = r.factory, "count"_a = r.count, "dim"_a = r.dim, "train_sample"_a = r.train_sample,
                    "recall_queries"_a = r.recall_queries, "recall_at_10"_a = r.recall_at_10, "build_seconds"_a = r.build_seconds,
                    "out"_a = to);
}

// (scores [n, k] float32, ids [n, k] int64) of queries [n, D] or one [D].
py::tuple index_search(const Index& index, const py::object& features, int k) {
    const py::array x = shared_array(features);
    const auto dims = checked_dims<float>(x, {1, 2}, "features", "[n, D] or [D]");
    const py::ssize_t n = dims.size() == 1 ? 1 : dims[0], d = dims.back();
    if (d != index.dim())
        throw UsageError(index.folder() + ": holds " + std::to_string(index.dim()) + "-d vectors, the features are " + std::to_string(d) + "-d");
    std::vector<float> scores(static_cast<std::size_t>(n) * std::max(k, 0));
    std::vector<std::int64_t> ids(scores.size());
    {
        py::gil_scoped_release release;
        index.search(static_cast<const float*>(x.data()), n, k, scores.data(), ids.data());
    }
    return py::make_tuple(owning_array(std::move(scores), {n, k}), owning_array(std::move(ids), {n, k}));
}

// [{"query": path, "results": [hit, ...]}, ...] as `vitreg search` prints them.
py::object search(const py::object& index_path, const PyModel& model, const py::object& images, Options& o) {
    const int k = o.take<int>("k", 10);
    std::vector<std::pair<std::string, std::string>> given;  // None: the extract's
    for (const auto& spec : pixel_option_table())
        if (o.given(spec.info.python_name().c_str())) given.push_back({spec.info.name, spec.info.python_name() + "="});
    const ResizeSpec requested = take_pixel_spec(o);
    o.finish();
    const Index index(path_of(index_path));
    const std::string feature = index.info().value("feature", "cls");
    const ResizeSpec resize = query_pixels(index.info(), model.model, requested, given);
    const std::string notes = query_mismatch(index.info(), model.model);
    if (!notes.empty() && PyErr_WarnEx(PyExc_UserWarning, notes.c_str(), 1) != 0) throw py::error_already_set();
    nlohmann::json out = nlohmann::json::array();
    for (const auto& image : input_list(images)) {
        nlohmann::json results = nlohmann::json::array();
        {
            py::gil_scoped_release release;
            const Pixels px = load_pixels(image, resize, model.model.config(), model.image_limits);
            const auto q = query_vector(model.model, px, feature, model.threads);
            if (static_cast<int>(q.size()) != index.dim())
                throw UsageError(index.folder() + ": holds " + std::to_string(index.dim()) + "-d " + feature + " vectors, the model gives " +
                                 std::to_string(q.size()));
            const auto found = index.search(q.data(), 1, k);
            for (const auto& hit : found[0]) results.push_back(index.describe(hit));
        }
        out.push_back({{"query", image}, {"results", results}});
    }
    return from_json(out);
}

}  // namespace

void bind_search(py::module_& m) {
    def_with_keywords(m, "index", &build, {"features", "out"}, table_keywords(index_option_table()),
                      R"(The index of `vitreg index`: a FAISS index (cosine) over an extract output folder.

features  the folder vitreg.extract wrote; out: the index folder (index.faiss, ids.jsonl, index.json).
factory   a FAISS factory string (None: chosen to fit memory, docs/retrieval.md); feature: cls,
          pooled or embedding. Returns the report: factory, count, dim, train_sample, recall_queries,
          recall_at_10 (against exact search on held-out rows), build_seconds, out.)");
    py::class_<Index>(m, "Index", "An index folder written by vitreg.index / `vitreg index`, loaded for search.")
        .def(py::init([](const py::object& path) { return Index(path_of(path)); }), "path"_a)
        .def_property_readonly("dim", &Index::dim)
        .def("__len__", &Index::size)
        .def_property_readonly("info", [](const Index& i) { return from_json(i.info()); }, "index.json as a dict")
        .def("entry", [](const Index& i, std::int64_t id) { return from_json(i.entry(id).to_json()); }, "id"_a,
             "The image of an id: key, path or shard and offset, metadata.")
        .def("search", &index_search, "features"_a, "k"_a = 10,
             R"(The k nearest of each row of features ([n, D] or [D] float32, read in place, normalized
for cosine by the search): (scores [n, k] float32, ids [n, k] int64), best first; id -1 where
the index holds fewer than k. entry(id) names each.)");
    def_with_keywords(m, "search", &search, {"index", "model", "images"}, keywords(Keyword{"k", py::int_(10)}) + unset_pixel_keywords(),
                      R"(`vitreg search`: each image's k nearest indexed images.

index   an index folder; model: the vitreg.Model the features were extracted with; images:
        files, folders or '@list.txt'. Pixel options (resize=, ...): None takes the extract's
        (index.json's source.run); one that contradicts them is refused.
Returns [{"query": path, "results": [{"id", "key", "score", "path" | "shard" + "offset",
"metadata"}, ...]}, ...].)");
}

}  // namespace vitreg::python
