// vitreg.defects: `vitreg defects` as arrays (the same library call, the same numbers).
#include <pybind11/pybind11.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/analysis/defects.hpp"

namespace vitreg::python {

namespace {

using namespace pybind11::literals;

py::dict defects(const py::object& model, Options& o) {
    DefectOptions options;
    options.samples = o.take<int>("samples", options.samples);
    options.seed = o.take<std::uint64_t>("seed", options.seed);
    options.top = o.take<int>("top", options.top);
    const std::string out = o.given("out") ? path_of(o.take<py::object>("out", py::none())) : std::string();
    o.finish();
    const std::vector<LabelledModel> configs = labelled_models(model);
    if (configs.size() != 1) throw UsageError("defects: one model, not " + std::to_string(configs.size()));
    DefectDirections d;
    {
        py::gil_scoped_release release;
        d = defect_directions(configs.front().model, options);
        if (!out.empty()) write_defects(d, out);
    }
    py::dict r;
    const std::vector<py::ssize_t> u_shape{d.layers, d.dim}, s_shape{d.layers, d.top};
    r["directions"] = owning_array(std::move(d.directions), u_shape);
    r["singular_values"] = owning_array(std::move(d.singular_values), s_shape);
    r["samples"] = d.samples;
    r["seed"] = d.seed;
    r["fit"] = d.fit_description();
    r["model"] = d.model;
    return r;
}

}  // namespace

void bind_defects(py::module_& m) {
    const DefectOptions defaults;
    def_with_keywords(m, "defects", &defects, {"model"},
                      keywords(Keyword{"samples", py::int_(defaults.samples)}, Keyword{"seed", py::int_(defaults.seed)},
                               Keyword{"top", py::int_(defaults.top)}, Keyword{"out"}),
                      R"(Per layer, the defect direction u_i and the top singular values of the linearized blocks'
product G_i = E_i...E_0 (SINDER), from the weights alone: the arrays `vitreg defects` writes.

model    a vitreg.Model or a name as the command takes it.
samples  rows of the seeded Gaussian sample each MLP's least-squares linearization is fitted on.
out      also write out/defects.safetensors and out/defects.json (what --defects reads).
Returns a dict: directions float32 [layers, dim] (unit; sign: largest component positive),
singular_values float32 [layers, top], samples, seed, fit, model.)");
}

}  // namespace vitreg::python
