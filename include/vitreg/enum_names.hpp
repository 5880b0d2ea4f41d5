#pragma once
// The user-facing names of an enum, written once: each enum's header specializes EnumTable with
// one array of {value, name}, and to_string, parsing and the lists of choices the CLI and Python
// show all read that array.
#include <optional>
#include <string>
#include <vector>

#include "vitreg/error.hpp"

namespace vitreg {

template <class Enum>
struct EnumName {
    Enum value;
    const char* name;
};

// Specialized beside each enum:
//   static constexpr const char* what = "attention kind";   (as parse errors say it)
//   static constexpr EnumName<Enum> names[] = {{Enum::A, "a"}, ...};   (in the order choices are listed)
template <class Enum>
struct EnumTable;

// The name of `value`; "?" for a value outside the table.
template <class Enum>
std::string name_of(Enum value) {
    for (const auto& e : EnumTable<Enum>::names)
        if (e.value == value) return e.name;
    return "?";
}

template <class Enum>
std::optional<Enum> find_enum(const std::string& name) {
    for (const auto& e : EnumTable<Enum>::names)
        if (name == e.name) return e.value;
    return std::nullopt;
}

// Every name, in the table's order (CLI::IsMember takes these).
template <class Enum>
std::vector<std::string> enum_names() {
    std::vector<std::string> out;
    for (const auto& e : EnumTable<Enum>::names) out.emplace_back(e.name);
    return out;
}

// Names as prose: "softmax, softmax1 or sink" (separator " | " gives "softmax | softmax1 | sink").
inline std::string choices_text(const std::vector<std::string>& names, const std::string& separator = ", ",
                                const std::string& last_separator = " or ") {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? last_separator : separator) + names[i];
    return out;
}

template <class Enum>
std::string enum_choices(const std::string& separator = ", ", const std::string& last_separator = " or ") {
    return choices_text(enum_names<Enum>(), separator, last_separator);
}

// The value named `name`; throws UsageError "unknown <what> '<name>' (expected <choices>)".
template <class Enum>
Enum parse_enum(const std::string& name) {
    if (auto v = find_enum<Enum>(name)) return *v;
    throw UsageError(std::string("unknown ") + EnumTable<Enum>::what + " '" + name + "' (expected " + enum_choices<Enum>() + ")");
}

}  // namespace vitreg
