// The configurations of vitreg.explore and vitreg.compare: vitreg.Model objects or names as the
// command line gives them, labelled as the commands label them.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/model_spec.hpp"

namespace vitreg::python {

namespace {

// How the commands label a vitreg.Model: as they label the spec that loads it.
std::string label_of(const Model& m) {
    ModelSpec s;
    s.model = m.path();
    if (m.config().retrofit()) s.attention = m.config().attention;
    if (m.precision().precision != Precision::Fp32) s.precision = m.precision();
    if (!m.intervention().empty()) s.intervention = m.intervention();
    s.suffix = s.to_string().substr(s.model.size());
    return s.label();
}

}  // namespace

std::vector<LabelledModel> labelled_models(const py::object& models, ImageLimits* limits) {
    const py::list items = py::isinstance<py::str>(models) || py::isinstance<PyModel>(models) ? py::list(py::make_tuple(models))
                                                                                               : py::list(models);
    std::vector<LabelledModel> out;
    for (const auto& item : items) {
        if (py::isinstance<PyModel>(item)) {
            const PyModel& m = item.cast<const PyModel&>();
            out.push_back({label_of(m.model), m.model});
            if (limits) *limits = m.image_limits;
            continue;
        }
        const ModelSpec s = ModelSpec::parse(item.cast<std::string>());
        Model loaded = open_model(ModelRequest::from_spec(s));
        const std::string retrofit = loaded.config().retrofit() ? " (retrofit)" : "";
        out.push_back({s.label() + retrofit, std::move(loaded)});
    }
    return out;
}

}  // namespace vitreg::python
