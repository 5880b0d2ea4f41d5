#include "vitreg/option_spec.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/parse_number.hpp"
#include "vitreg/enum_names.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// A bound as it is written: 4096, not 4096.000000.
std::string bound_text(double v) { return option_text(OptionValue(v)); }

}  // namespace

std::string option_text(const OptionValue& value) {
    if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
    if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
    if (const auto* d = std::get_if<double>(&value)) {
        char text[32];
        const auto end = std::to_chars(text, text + sizeof text, *d).ptr;  // the shortest round trip
        return std::string(text, end);
    }
    return std::get<std::string>(value);
}

OptionValue option_value(float value) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, value).ptr;
    return std::stod(std::string(text, end));
}

std::string OptionInfo::python_name() const {
    if (!keyword.empty()) return keyword;
    std::string k = name;
    std::replace(k.begin(), k.end(), '-', '_');
    return k;
}

namespace {

// The value `text` spells for a type, or why it spells none.
std::variant<OptionValue, std::string> read(ValueType type, const std::string& text) {
    switch (type) {
        case ValueType::Flag:
            if (text == "true" || text == "1") return OptionValue(true);
            if (text == "false" || text == "0") return OptionValue(false);
            return "'" + text + "' is not true or false";
        case ValueType::Integer:
            if (const auto v = parse_integer(text, std::numeric_limits<long>::min(), std::numeric_limits<long>::max()))
                return OptionValue(static_cast<std::int64_t>(*v));
            return "'" + text + "' is not an integer";
        case ValueType::Real:
            if (const auto v = parse_real(text, -HUGE_VAL, HUGE_VAL)) return OptionValue(*v);
            return "'" + text + "' is not a number";
        case ValueType::Text: break;
    }
    return OptionValue(text);
}

}  // namespace

OptionValue OptionInfo::parse(const std::string& text, const std::string& label) const {
    auto value = read(type, text);
    if (const auto* why = std::get_if<std::string>(&value)) throw UsageError(label + ": " + *why);
    return std::get<OptionValue>(value);
}

std::string OptionInfo::text_fault(const std::string& text) const {
    const auto value = read(type, text);
    if (const auto* why = std::get_if<std::string>(&value)) return *why;
    return fault(std::get<OptionValue>(value));
}

std::string OptionInfo::fault(const OptionValue& value) const {
    if (const auto* text = std::get_if<std::string>(&value)) {
        if (choices.empty() || std::find(choices.begin(), choices.end(), *text) != choices.end()) return "";
        return "'" + *text + "' is not one of " + choices_text(choices, ", ", ", ");
    }
    if (!bounded() || std::holds_alternative<bool>(value)) return "";
    const double v = std::holds_alternative<double>(value) ? std::get<double>(value) : double(std::get<std::int64_t>(value));
    if (v >= min && v <= max) return "";
    return option_text(value) + " is outside " + bound_text(min) + ".." + bound_text(max);
}

void OptionInfo::check(const OptionValue& value, const std::string& label) const {
    const std::string why = fault(value);
    if (!why.empty()) throw UsageError(label + ": " + why);
}

}  // namespace vitreg
