// vitreg.explore: the explorer page of `vitreg explore` as a string, and an object that
// Jupyter shows inline (the page in a sandboxed iframe, so its script and style stay its own).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/render/explore_page.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::python {

namespace {

using namespace pybind11::literals;

struct ExplorePage {
    std::string html;
};

ExplorePage explore(const py::object& models, const py::object& images, Options& o) {
    render::PageOptions options;
    options.queries = render::QuerySelection::parse(o.take<std::string>("queries", "auto"));
    options.rollout = o.take<bool>("rollout", true);
    const double mb = o.take<double>("max_page_mb", 48.0);
    if (!(mb >= 1 && mb <= 4096)) throw UsageError("explore: max_page_mb must be in 1..4096");
    options.max_bytes = static_cast<std::size_t>(mb * 1024 * 1024);
    options.title = o.take<std::string>("title", options.title);
    const ResizeSpec spec = take_pixel_spec(o);
    const int threads = o.take<int>("threads", 0);
    const ArtifactRule rule = take_artifact_rule(o);
    o.finish();

    // Models as vitreg.Model objects or as the command line names them ("MODEL@softmax1@bf16").
    ImageLimits limits;
    const std::vector<LabelledModel> labelled = labelled_models(models, &limits);
    std::vector<render::PageConfig> configs;
    for (const auto& m : labelled) configs.push_back({m.label, &m.model, rule.for_model(m.model)});
    const auto paths = input_list(images);
    ExplorePage page;
    py::gil_scoped_release release;
    page.html = render::static_explore_page(configs, paths, spec, limits, options, threads);
    return page;
}

// The page as an attribute value: escaped, and every non-ASCII character as a numeric reference,
// so that the frame reads the same whatever encoding the notebook's page declares.
std::string attribute_text(const std::string& utf8) {
    std::string out;
    out.reserve(utf8.size() + utf8.size() / 8);
    for (std::size_t i = 0; i < utf8.size();) {
        const auto c = static_cast<unsigned char>(utf8[i]);
        const std::size_t extra = c < 0x80 ? 0 : c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
        if (extra > 0 && i + extra < utf8.size()) {
            std::uint32_t code = c & (0x3fu >> extra);
            for (std::size_t k = 1; k <= extra; ++k) code = (code << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3fu);
            out += "&#" + std::to_string(code) + ";";
            i += extra + 1;
            continue;
        }
        switch (c) {
            case '&': out += "&amp;"; break;
            case '"': out += "&quot;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            default: out += static_cast<char>(c);
        }
        ++i;
    }
    return out;
}

// Jupyter's view: the page in an iframe of its own (srcdoc), scripts allowed, nothing else.
std::string repr_html(const ExplorePage& p) {
    return "<iframe srcdoc=\"" + attribute_text(p.html) +
           "\" sandbox=\"allow-scripts\" style=\"width:100%;height:1200px;border:0\" title=\"vitreg explore\"></iframe>";
}

}  // namespace

void bind_explore(py::module_& m) {
    py::class_<ExplorePage>(m, "ExplorePage", "The explorer page of vitreg.explore; Jupyter shows it inline.")
        .def_readonly("html", &ExplorePage::html, "The page: one self-contained HTML document.")
        .def("save", [](const ExplorePage& p, const py::object& path) { write_file_atomic(path_of(path), p.html); }, "path"_a,
             "Writes the page to a file (whole or not at all).")
        .def("_repr_html_", &repr_html)
        .def_property_readonly("size", [](const ExplorePage& p) { return p.html.size(); }, "The page's size in bytes (UTF-8).")
        .def("__str__", [](const ExplorePage& p) { return p.html; })
        .def("__repr__", [](const ExplorePage& p) { return "<vitreg.ExplorePage, " + std::to_string(p.html.size()) + " bytes>"; });
    const render::PageOptions defaults;
    def_with_keywords(m, "explore", &explore, {"models", "images"},
                      keywords(Keyword{"queries", py::str("auto")}, Keyword{"rollout", py::bool_(true)},
                               Keyword{"max_page_mb", py::float_(48.0)},
                               Keyword{"title", py::str(defaults.title)}) +
                          artifact_rule_keywords() + pixel_keywords() + keywords(Keyword{"threads", py::int_(0)}),
                      R"(The attention explorer of `vitreg explore`: any patch, layer and head, configurations side by side.

models   vitreg.Model objects, or names as the command takes them ('MODEL@softmax1@bf16', '@evict=sink', ...).
images   files, folders or '@list.txt', or a list of them.
queries  whose rows the page stores: 'auto' (all within max_page_mb, else every S-th patch), 'all',
         'cls', 'stride:S' or 'R,C;R,C' (CLS and the registers always).
Returns a vitreg.ExplorePage: .html (the page as a string), .save(path), and in Jupyter it shows inline.)");
}

}  // namespace vitreg::python
