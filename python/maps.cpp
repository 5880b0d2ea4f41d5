// vitreg.maps: `vitreg maps` through the same library call (render::write_maps): stats.json as a
// dict with the arrays beside it, and the command's files when `out` is given.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/render/maps.hpp"

namespace vitreg::python {

namespace {

py::array_t<float> array_of(render::MapsArray&& a) {
    return owning_array(std::move(a.values), std::vector<py::ssize_t>(a.shape.begin(), a.shape.end()));
}

// The keywords as the command's flags give them; the image limits are the vitreg.Model's.
render::MapsOptions take_maps_options(Options& o) {
    render::MapsOptions m;
    if (o.given("out")) m.out = path_of(o.take<py::object>("out", py::none()));
    m.layers = o.take<std::string>("layers", m.layers);
    m.heads = o.take<std::string>("heads", m.heads);
    m.query = o.take<std::string>("query", m.query);
    m.rollout = o.take<bool>("rollout", m.rollout);
    m.discard = o.take<float>("discard", m.discard);
    m.resize = take_pixel_spec(o);
    m.save_attention = o.take<bool>("save_attention", m.save_attention);
    m.save_norms = o.take<bool>("save_norms", m.save_norms);
    m.rules.norm_threshold = o.take<float>("norm_threshold", m.rules.norm_threshold);
    m.rules.rule = take_artifact_rule(o);
    m.threads = o.take<int>("threads", m.threads);
    o.finish();
    return m;
}

py::dict maps(const py::object& model, const py::object& image, Options& o) {
    render::MapsOptions options = take_maps_options(o);
    const std::vector<LabelledModel> configs = labelled_models(model, &options.image_limits);
    if (configs.size() != 1) throw UsageError("maps: one model, not " + std::to_string(configs.size()));
    if (py::isinstance<PyModel>(model)) options.max_tokens = model.cast<const PyModel&>().max_tokens;
    const std::string path = path_of(image);
    render::MapsResult r;
    std::string text;
    {
        py::gil_scoped_release release;
        r = render::write_maps(configs.front().model, path, options);
        text = r.stats_json.dump();
    }
    py::dict out = py::module_::import("json").attr("loads")(text);
    out["attention_rows"] = array_of(std::move(r.attention));
    out["norms"] = array_of(std::move(r.norms));
    out["files"] = r.written;
    return out;
}

}  // namespace

void bind_maps(py::module_& m) {
    const render::MapsOptions d;
    def_with_keywords(
        m, "maps", &maps, {"model", "image"},
        keywords(Keyword{"out"}, Keyword{"layers", py::str(d.layers)}, Keyword{"heads", py::str(d.heads)},
                 Keyword{"query", py::str(d.query)}, Keyword{"rollout", py::bool_(d.rollout)},
                 Keyword{"discard", decimal(d.discard)}) +
            pixel_keywords() +
            keywords(Keyword{"save_attention", py::bool_(d.save_attention)}, Keyword{"save_norms", py::bool_(d.save_norms)},
                     Keyword{"norm_threshold", decimal(d.rules.norm_threshold)}) +
            artifact_rule_keywords() + keywords(Keyword{"threads", py::int_(d.threads)}),
        R"(`vitreg maps`: one image's attention maps, patch-norm heatmaps and artifact statistics.

model           a vitreg.Model (its max_image_pixels and max_tokens apply) or a name as the command takes it.
image           the image file.
out             also write what the command writes there: attention.png, norms.png, histogram.png,
                abstention.png (softmax-1 and sink models), rollout.png (rollout=True), stats.json,
                attention.npy (save_attention=True) and norms.npy (save_norms=True). None: write nothing.
layers          the layers drawn and in attention_rows: 'all', 'last' or 'i,j,...' (negative counts from the end).
heads           'all' (each head and their mean), 'mean', 'max' or 'min'.
query           whose attention: 'cls', 'reg:K', 'patch:R,C' or 'probe' (the attention-pool head's query).
rollout         also rollout.png (Abnar & Zuidema); discard: the fraction of smallest fused weights zeroed.
norm_threshold  the absolute artifact rule: patch norm > norm_threshold.
mad_k           the model-free rule: patch norm (or |cos|) > median + mad_k * MAD.
artifact_rule   which patches are artifacts: 'norm', 'direction' or 'both'; defects: a file of
                vitreg.defects / `vitreg defects` (default: computed from the model's weights).
Returns stats.json as a dict, plus "attention_rows" (float32 [layers, heads, 1, tokens], [1, heads, 1,
tokens] for the probe: attention.npy), "norms" (float32 [layers, tokens]: norms.npy) and "files" (the
paths written).)");
}

}  // namespace vitreg::python
