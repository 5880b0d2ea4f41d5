#pragma once
// One description per option a front end offers (docs/design.md, "One option model"): its name,
// type, bounds, choices and help, and how it reads and sets its field of the options struct. The
// command line (CLI11) and Python (pybind11 keywords) both build their options from these tables,
// so the names, defaults (the struct's own initializers), bounds, checks and help agree. Each
// table lives beside the struct it fills (pixel_option_table() in preprocess.hpp, ...).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace vitreg {

enum class ValueType { Flag, Integer, Real, Text };

// A value as a front end hands it over: the command line's text parsed, or a Python object cast.
using OptionValue = std::variant<bool, std::int64_t, double, std::string>;

struct OptionInfo {
    std::string name;  // the long flag without "--"
    ValueType type = ValueType::Text;
    std::string help;
    std::vector<std::string> choices;  // Text: the values it takes; empty: any
    double min = 0, max = 0;           // Integer, Real: the inclusive bounds; min == max: none
    std::string keyword;               // Python's keyword where it is not the name with '-' -> '_'
    // Text: Python may give the value as a sequence of numbers, joined by this ("," for
    // 0.5,1,1.5, "x" for a grid HxW); its Python default is then None (the table's default).
    std::string joiner;

    OptionInfo(std::string name_, ValueType type_, std::string help_, std::vector<std::string> choices_ = {},
               double min_ = 0, double max_ = 0, std::string keyword_ = "", std::string joiner_ = "")
        : name(std::move(name_)), type(type_), help(std::move(help_)), choices(std::move(choices_)), min(min_), max(max_),
          keyword(std::move(keyword_)), joiner(std::move(joiner_)) {}

    std::string flag() const { return "--" + name; }
    std::string python_name() const;
    bool bounded() const { return min != max; }
    // The command line's text as a value of this type; throws UsageError "LABEL: ..." when it is none.
    OptionValue parse(const std::string& text, const std::string& label) const;
    // Why `value` is refused ("0 is outside 1..4096", "'fast' is not one of exact, draft"), or "".
    std::string fault(const OptionValue& value) const;
    // Throws UsageError "LABEL: <fault>" (LABEL: "--batch" on the command line, "batch" in Python).
    void check(const OptionValue& value, const std::string& label) const;
    // Why the command line's `text` is refused (not of the type, or the value's fault), or "".
    std::string text_fault(const std::string& text) const;
};

// A value as text: what --help shows as the default and what parse reads back.
std::string option_text(const OptionValue& value);

template <class S>
struct OptionSpec {
    OptionInfo info;
    OptionValue (*get)(const S& from);            // the field's value (of a default S: the default)
    void (*set)(S& to, const OptionValue& value);  // may refuse with UsageError (a malformed list)

    // Checks `value` against the description, then sets the field.
    void apply(S& to, const OptionValue& value, const std::string& label) const {
        info.check(value, label);
        set(to, value);
    }
};

template <class S, std::size_t N>
using OptionTable = std::array<OptionSpec<S>, N>;

// The value of a field as a table holds it (a float by its shortest decimal, so 0.3f shows 0.3).
OptionValue option_value(float value);
template <class T>
OptionValue option_value(const T& value) {
    if constexpr (std::is_same_v<T, bool>) return value;
    else if constexpr (std::is_integral_v<T>) return static_cast<std::int64_t>(value);
    else if constexpr (std::is_floating_point_v<T>) return static_cast<double>(value);
    else return std::string(value);
}

// A value as the field's type (checked against the type by parse, or by the front end's cast).
template <class T>
T value_as(const OptionValue& value) {
    if constexpr (std::is_same_v<T, bool>) return std::get<bool>(value);
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(std::get<std::int64_t>(value));
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(std::get<double>(value));
    else return std::get<std::string>(value);
}

namespace detail {
template <class>
struct member_of;
template <class S, class T>
struct member_of<T S::*> {
    using owner = S;
    using type = T;
};
}  // namespace detail

// get and set of a plain field: OptionSpec<S>{info, field_get<&S::x>, field_set<&S::x>}.
template <auto M>
OptionValue field_get(const typename detail::member_of<decltype(M)>::owner& from) {
    return option_value(from.*M);
}
template <auto M>
void field_set(typename detail::member_of<decltype(M)>::owner& to, const OptionValue& value) {
    to.*M = value_as<typename detail::member_of<decltype(M)>::type>(value);
}

// The entry called `name` (the flag without "--"); null when there is none.
template <class S, std::size_t N>
const OptionSpec<S>* find_option(const OptionTable<S, N>& table, const std::string& name) {
    for (const auto& spec : table)
        if (spec.info.name == name) return &spec;
    return nullptr;
}

}  // namespace vitreg
