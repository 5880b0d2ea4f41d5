#pragma once
// What the module's calls share for their keyword options: declaring them as named keyword-only
// parameters (so help() and editors show them), taking them one by one (a left-over one is a
// mistake), a model's options (the table of model_options.hpp), paths as str or
// os.PathLike, image inputs, and the pixel options (resize=, pipeline=, resample=, decode=,
// exif_transpose=) as on the command line.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <charconv>
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "vitreg/analysis/artifact_rule.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/model_options.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/option_spec.hpp"
#include "vitreg/pixel_options.hpp"

namespace vitreg::python {

namespace py = pybind11;

// Keyword options of one job call, taken one by one. A None leaves the fallback. Declared (the
// call's named keywords, all present): taking an undeclared one, or leaving a declared one untaken,
// is the binding's mistake; otherwise (**kwargs) what is left over is the caller's.
class Options {
public:
    Options(std::string job, const py::kwargs& kwargs, bool declared = false)
        : job_(std::move(job)), left_(py::dict(kwargs)), declared_(declared) {}

    template <class T>
    T take(const char* key, T fallback) {
        if (!left_.contains(key)) {
            if (declared_) throw Error("internal: " + job_ + " reads option " + key + ", which its binding does not declare");
            return fallback;
        }
        const py::object value = left_[key];
        PyDict_DelItemString(left_.ptr(), key);
        if (value.is_none()) return fallback;
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
        if (declared_) throw Error("internal: " + job_ + " declares option(s) " + names + " but does not read them");
        throw UsageError(job_ + ": unknown option(s) " + names);
    }

private:
    std::string job_;
    py::dict left_;
    bool declared_;
};

// A named keyword-only parameter of a binding and its default (None: the call's own default).
struct Keyword {
    std::string name;
    py::object fallback = py::none();
};

// A float default as C++ source writes it (0.3, not 0.30000001192092896): its shortest decimal.
inline py::object decimal(float value) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, value).ptr;
    return py::float_(std::stod(std::string(text, end)));
}

template <class... K>
std::array<Keyword, sizeof...(K)> keywords(K&&... k) {
    return {Keyword(std::forward<K>(k))...};
}

template <std::size_t A, std::size_t B>
std::array<Keyword, A + B> operator+(const std::array<Keyword, A>& a, const std::array<Keyword, B>& b) {
    std::array<Keyword, A + B> out;
    for (std::size_t i = 0; i < A; ++i) out[i] = a[i];
    for (std::size_t i = 0; i < B; ++i) out[A + i] = b[i];
    return out;
}

namespace detail {

template <std::size_t, class T>
using indexed = T;

template <class R, class... A, std::size_t... P, std::size_t... K>
void def_with_keywords(py::module_& m, const char* name, R (*body)(A...),
                       const std::array<const char*, sizeof...(P)>& positional, const std::array<Keyword, sizeof...(K)>& named,
                       const char* doc, std::index_sequence<P...>, std::index_sequence<K...>) {
    using Args = std::tuple<A...>;
    std::array<std::string, sizeof...(K)> names{named[K].name...};
    m.def(
        name,
        [body, names, job = std::string(name)](std::tuple_element_t<P, Args>... args, indexed<K, py::object>... values) -> R {
            py::kwargs given;
            ((given[names[K].c_str()] = values), ...);
            Options o(job, given, true);
            return body(std::forward<std::tuple_element_t<P, Args>>(args)..., o);
        },
        py::arg(positional[P])..., py::kw_only(), (py::arg(named[K].name.c_str()) = named[K].fallback)..., doc);
}

}  // namespace detail

// m.def of `body(positional..., Options&)` as name(positional..., *, keyword=default, ...): the keywords
// are real parameters (help(), editors and pybind11's own check of names see them), read in the
// body through Options as before.
template <class R, class... A, std::size_t N>
void def_with_keywords(py::module_& m, const char* name, R (*body)(A...), const std::array<const char*, sizeof...(A) - 1>& positional,
                       const std::array<Keyword, N>& named, const char* doc) {
    detail::def_with_keywords(m, name, body, positional, named, doc, std::make_index_sequence<sizeof...(A) - 1>{},
                              std::make_index_sequence<N>{});
}

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

// An option table's entry as Python's default: None where the table's default is empty text or
// the keyword may be a sequence (joiner), else the value.
inline py::object keyword_default(const OptionInfo& info, const OptionValue& value) {
    if (!info.joiner.empty()) return py::none();
    switch (info.type) {
        case ValueType::Flag: return py::bool_(std::get<bool>(value));
        case ValueType::Integer: return py::int_(std::get<std::int64_t>(value));
        case ValueType::Real: return py::float_(std::get<double>(value));
        case ValueType::Text: break;
    }
    const auto& text = std::get<std::string>(value);
    return text.empty() ? py::object(py::none()) : py::object(py::str(text));
}

// The keywords of an option table (option_spec.hpp), by their Python names, defaults from `defaults`.
template <class S, std::size_t N>
std::array<Keyword, N> table_keywords(const OptionTable<S, N>& table, const S& defaults = S()) {
    std::array<Keyword, N> out;
    for (std::size_t i = 0; i < N; ++i)
        out[i] = Keyword{table[i].info.python_name(), keyword_default(table[i].info, table[i].get(defaults))};
    return out;
}

// A Text keyword's value: a str, or with a joiner a sequence of numbers joined by it ([0.5, 1] ->
// "0.5,1", (32, 48) -> "32x48").
inline std::string keyword_text(const OptionInfo& info, const py::object& value) {
    if (py::isinstance<py::str>(value)) return value.cast<std::string>();
    const std::string key = info.python_name();
    if (info.joiner.empty() || !py::isinstance<py::sequence>(value))
        throw UsageError(key + ": " + std::string(py::repr(value)) + " is not a str" + (info.joiner.empty() ? "" : " or a sequence"));
    std::string text;
    for (const auto& item : value) text += (text.empty() ? "" : info.joiner) + std::string(py::str(item));
    return text;
}

// The table's keywords that are given (not None) set in `to`, through the checks the command line
// runs; the others keep `to`'s values.
template <class S, std::size_t N>
void take_table(Options& o, const OptionTable<S, N>& table, S& to) {
    for (const auto& spec : table) {
        const std::string key = spec.info.python_name();
        if (!o.given(key.c_str())) continue;
        OptionValue value;
        switch (spec.info.type) {
            case ValueType::Flag: value = o.take<bool>(key.c_str(), false); break;
            case ValueType::Integer: value = o.take<std::int64_t>(key.c_str(), 0); break;
            case ValueType::Real: value = o.take<double>(key.c_str(), 0.0); break;
            case ValueType::Text: value = keyword_text(spec.info, o.take<py::object>(key.c_str(), py::none())); break;
        }
        spec.apply(to, value, key);
    }
}

// resize=, pipeline=, resample=, decode=, exif_transpose=: as on the command line (pixel_option_table).
inline auto pixel_keywords(const ResizeSpec& defaults = ResizeSpec()) {
    return table_keywords(pixel_option_table(), defaults);
}

// The pixel keywords all None: the caller's own default (search: the extract's).
inline auto unset_pixel_keywords() {
    std::array<Keyword, std::tuple_size<std::decay_t<decltype(pixel_option_table())>>::value> out;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = Keyword{pixel_option_table()[i].info.python_name()};
    return out;
}

inline ResizeSpec take_pixel_spec(Options& o, const ResizeSpec& defaults = ResizeSpec()) {
    ResizeSpec r = defaults;
    take_table(o, pixel_option_table(), r);
    return r;
}

// mad_k=, artifact_rule='norm'|'direction'|'both', defects=FILE (else computed from each model),
// defect_samples=, defect_seed=: the artifact rule as the commands' options give it. `optional`:
// artifact_rule defaults to None (dense: no mask unless asked).
inline std::array<Keyword, 5> artifact_rule_keywords(bool optional = false) {
    const ArtifactRule r;
    return keywords(Keyword{"mad_k", decimal(r.mad_k)},
                    optional ? Keyword{"artifact_rule"} : Keyword{"artifact_rule", py::str(name_of(r.test))},
                    Keyword{"defects"}, Keyword{"defect_samples", py::int_(r.fit.samples)},
                    Keyword{"defect_seed", py::int_(r.fit.seed)});
}

// With `rule_given`: whether artifact_rule was given (not None); the rule's test is then read.
inline ArtifactRule take_artifact_rule(Options& o, bool* rule_given = nullptr) {
    ArtifactRule r;
    r.mad_k = o.take<float>("mad_k", r.mad_k);
    if (!rule_given || (*rule_given = o.given("artifact_rule")))
        r.test = parse_enum<ArtifactTest>(o.take<std::string>("artifact_rule", name_of(r.test)));
    if (o.given("defects")) r.defects_file = path_of(o.take<py::object>("defects", py::none()));
    r.fit.samples = o.take<int>("defect_samples", r.fit.samples);
    r.fit.seed = o.take<std::uint64_t>("defect_seed", r.fit.seed);
    return r;
}

}  // namespace vitreg::python
