#pragma once
// What the module's calls share for their keyword options: taking them one by one (a left-over
// one is a mistake), a model's options (the table of model_options.hpp), paths as str or
// os.PathLike, image inputs, and the pixel options (resize=, pipeline=, resample=, decode=,
// exif_transpose=) as on the command line.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "vitreg/analysis/artifact_rule.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/model_options.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg::python {

namespace py = pybind11;

// Keyword options of one job call, taken one by one; what is left over is a mistake.
class Options {
public:
    Options(std::string job, const py::kwargs& kwargs) : job_(std::move(job)), left_(kwargs) {}

    template <class T>
    T take(const char* key, T fallback) {
        if (!left_.contains(key)) return fallback;
        const py::object value = left_[key];
        PyDict_DelItemString(left_.ptr(), key);
        try {
            return value.cast<T>();
        } catch (const py::cast_error&) {
            throw UsageError(job_ + ": option " + key + "=" + std::string(py::repr(value)) + " has the wrong type");
        }
    }

    // Whether `key` is given as something other than None (a None is taken: the default stays).
    bool given(const char* key) {
        if (!left_.contains(key)) return false;
        if (!left_[key].is_none()) return true;
        PyDict_DelItemString(left_.ptr(), key);
        return false;
    }

    void finish() const {
        if (left_.empty()) return;
        std::string names;
        for (const auto& kv : left_) names += (names.empty() ? "" : ", ") + std::string(py::str(kv.first));
        throw UsageError(job_ + ": unknown option(s) " + names);
    }

private:
    std::string job_;
    py::dict left_;
};

inline std::string path_of(const py::object& path) { return py::str(py::module_::import("os").attr("fspath")(path)); }

inline std::vector<std::string> input_list(const py::object& inputs) {
    std::vector<std::string> args;
    if (py::isinstance<py::str>(inputs) || py::hasattr(inputs, "__fspath__")) {
        args.push_back(path_of(inputs));
    } else {
        for (const auto& item : inputs) args.push_back(path_of(py::reinterpret_borrow<py::object>(item)));
    }
    auto expanded = expand_inputs(args);
    if (expanded.empty()) throw UsageError("no input images found");
    return expanded;
}

// The table's options (model_options()) among the keywords, by their Python names, as the text
// ModelRequest::from_options reads: numbers as int, the rest as str; None leaves the default.
inline OptionValues take_model_options(Options& o) {
    OptionValues values;
    for (const ModelOption& option : model_options()) {
        const std::string key = option.keyword();
        if (!o.given(key.c_str())) continue;
        values[option.name] = option.kind == OptionKind::Integer ? std::to_string(o.take<std::int64_t>(key.c_str(), 0))
                                                                 : o.take<std::string>(key.c_str(), "");
    }
    return values;
}

// resize=, pipeline=, resample=, decode=, exif_transpose=: as on the command line.
inline ResizeSpec take_pixel_spec(Options& o, const std::string& default_resize = "eval") {
    ResizeSpec r = ResizeSpec::parse(o.take<std::string>("resize", default_resize));
    const auto pipeline = o.take<std::string>("pipeline", "");
    if (!pipeline.empty()) r.pipeline = parse_pixel_pipeline(pipeline);
    r.resampler = parse_resampler(o.take<std::string>("resample", "pil"));
    const auto decode = o.take<std::string>("decode", "exact");
    if (decode != "exact" && decode != "draft") throw UsageError("decode must be 'exact' or 'draft', not '" + decode + "'");
    r.draft = decode == "draft";
    r.exif_transpose = o.take<bool>("exif_transpose", false);
    return r;
}

// mad_k=, artifact_rule='norm'|'direction'|'both', defects=FILE (else computed from each model),
// defect_samples=, defect_seed=: the artifact rule as the commands' options give it.
inline ArtifactRule take_artifact_rule(Options& o) {
    ArtifactRule r;
    r.mad_k = o.take<float>("mad_k", r.mad_k);
    r.test = parse_enum<ArtifactTest>(o.take<std::string>("artifact_rule", name_of(r.test)));
    if (o.given("defects")) r.defects_file = path_of(o.take<py::object>("defects", py::none()));
    r.fit.samples = o.take<int>("defect_samples", r.fit.samples);
    r.fit.seed = o.take<std::uint64_t>("defect_seed", r.fit.seed);
    return r;
}

}  // namespace vitreg::python
