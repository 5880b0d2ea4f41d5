// vitreg._vitreg._option_table(group): the library's option tables as Python sees them, so that a test can
// hold the stubs to them (tests/python/test_package.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "vitreg/search/index.hpp"
#include "kwargs.hpp"
#include "vitreg/analysis/eval_options.hpp"
#include "vitreg/batch_options.hpp"
#include "vitreg/dense_options.hpp"

namespace vitreg::python {

namespace {

using namespace pybind11::literals;

template <class S, std::size_t N>
py::list table_list(const OptionTable<S, N>& table) {
    const S defaults;
    const char* types[] = {"bool", "int", "float", "str"};
    py::list out;
    for (const auto& spec : table) {
        const OptionInfo& i = spec.info;
        out.append(py::dict("name"_a = i.name, "keyword"_a = i.python_name(), "flag"_a = i.flag(),
                            "type"_a = types[static_cast<int>(i.type)], "help"_a = i.help, "choices"_a = i.choices,
                            "bounds"_a = i.bounded() ? py::object(py::make_tuple(i.min, i.max)) : py::object(py::none()),
                            "default"_a = keyword_default(i, spec.get(defaults))));
    }
    return out;
}

py::list option_table(const std::string& group) {
    if (group == "pixel") return table_list(pixel_option_table());
    if (group == "batch") return table_list(batch_option_table());
    if (group == "dense") return table_list(dense_option_table());
    if (group == "segmentation") return table_list(segmentation_option_table());
    if (group == "knn") return table_list(knn_option_table());
    if (group == "index") return table_list(index_option_table());
    throw UsageError("_option_table: no group '" + group + "' (pixel, batch, dense, segmentation, knn, index)");
}

}  // namespace

void bind_option_tables(py::module_& m) {
    m.def("_option_table", &option_table, "group"_a,
          "One option table of the library as a list of dicts: name (the command line's --name), keyword (Python's), "
          "flag, type, help, choices, bounds (min, max) or None, default (of the options struct as constructed).");
}

}  // namespace vitreg::python
