#pragma once
// The command line's options from the library's option tables (vitreg/option_spec.hpp): each
// entry's flag, help, type, default (the options struct's own) and check. The values given are
// kept as text and applied to the struct when the command runs, through the same checks Python's
// keywords go through.
#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "vitreg/error.hpp"
#include "vitreg/enum_names.hpp"
#include "vitreg/option_spec.hpp"

namespace vitreg::cli {

// The options given on the command line: name (the flag without "--") -> text.
using GivenOptions = std::map<std::string, std::string>;

// One entry as a CLI11 option writing into `given`; `default_text` is what --help shows ("": none).
inline CLI::Option* add_option_info(CLI::App& cmd, const OptionInfo& info, const std::string& default_text,
                                    GivenOptions& given) {
    const std::string name = info.name;
    if (info.type == ValueType::Flag)
        return cmd.add_flag_function(info.flag(), [&given, name](std::int64_t) { given[name] = "true"; }, info.help);
    CLI::Option* option =
        cmd.add_option_function<std::string>(info.flag(), [&given, name](const std::string& v) { given[name] = v; }, info.help);
    // The library's check, so that a bad value is refused while parsing with the message Python gives.
    const std::string shown = !info.choices.empty() ? "{" + choices_text(info.choices, ",", ",") + "}"
                              : info.bounded()      ? "[" + option_text(OptionValue(info.min)) + ".." +
                                                     option_text(OptionValue(info.max)) + "]"
                                                    : "";
    option->check(CLI::Validator([info](std::string& text) { return info.text_fault(text); }, shown));
    option->type_name(info.type == ValueType::Integer ? "INT" : info.type == ValueType::Real ? "FLOAT" : "TEXT");
    if (!default_text.empty()) option->default_str(default_text);
    return option;
}

// Every entry of `table` on `cmd`, the defaults read from `defaults`.
template <class S, std::size_t N>
void add_table_options(CLI::App& cmd, const OptionTable<S, N>& table, const S& defaults, GivenOptions& given) {
    for (const auto& spec : table) add_option_info(cmd, spec.info, option_text(spec.get(defaults)), given);
}

// The given options of `table` set in `to` (the others keep its values); throws UsageError.
template <class S, std::size_t N>
void apply_given(const OptionTable<S, N>& table, const GivenOptions& given, S& to) {
    for (const auto& spec : table) {
        const auto it = given.find(spec.info.name);
        if (it != given.end()) spec.apply(to, spec.info.parse(it->second, spec.info.flag()), spec.info.flag());
    }
}

}  // namespace vitreg::cli
