// import vitreg: the library from Python, numpy in and out.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "vitreg/version.hpp"

PYBIND11_MODULE(_vitreg, m) {
    m.doc() = R"(vitreg: a CPU Vision Transformer feature extractor built to show and remove attention artifacts.

    m = vitreg.Model("vitreg-untrained-s14-d192-reg4")   # any MODEL the vitreg command takes
    x = m.preprocess("cat.jpg")                             # float32 [3, 224, 224]
    out = m.forward(x[None])                                # cls, pooled, registers, patch
    tr = m.trace(x[None], attention_layers="all", queries=["cls"], norms=True)
    vitreg.extract(m, ["images/"], "out/", patch_tokens=True)
    vitreg.explore([m, "vitreg-untrained-s14-d192-reg4@softmax1"], "cat.jpg")   # the explorer page; inline in Jupyter
    stats = vitreg.compare([m, "vitreg-untrained-s14-d192-reg4@softmax1"], "cat.jpg")  # stats.json of `vitreg compare`
    maps = vitreg.maps(m, "cat.jpg", out="maps/", query="patch:3,4")          # stats.json and the pictures of `vitreg maps`

Errors are vitreg.Error (CheckpointError, ConfigError, ImageError, IoError, UsageError under it).)";
    m.attr("__version__") = VITREG_VERSION;
    vitreg::python::bind_errors(m);
    vitreg::python::bind_model(m);
    vitreg::python::bind_jobs(m);
    vitreg::python::bind_images(m);
    vitreg::python::bind_explore(m);
    vitreg::python::bind_compare(m);
    vitreg::python::bind_eval(m);
    vitreg::python::bind_defects(m);
    vitreg::python::bind_maps(m);
    vitreg::python::bind_search(m);
    vitreg::python::bind_option_tables(m);
}
