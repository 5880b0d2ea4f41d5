#pragma once
// The one table of the options a model is opened and run with: the command line's flags
// (`--NAME`, with this help, choices and range) and vitreg.Model's keywords (NAME with '-' ->
// '_') are both read from it, and ModelRequest::from_options applies their values.
#include <cstdint>
#include <string>
#include <vector>

namespace vitreg {

struct ModelRequest;

enum class OptionKind { Text, Integer };

// Which part of a front end takes the option: every command that opens a model (Open), or those
// that also run images through it (Run: threads, input limits; vitreg.Model takes both).
enum class OptionGroup { Open, Run };

struct ModelOption {
    std::string name;  // the long flag without "--"
    OptionKind kind;
    OptionGroup group;
    std::string help;
    std::vector<std::string> choices;  // the values it takes; empty: any (in the range, for Integer)
    std::int64_t min = 0, max = 0;     // Integer: the range
    std::string default_text;          // what --help shows as the default; "" = unset, none shown
    // Sets the option in `request` from a value already checked against kind and range.
    void (*apply)(ModelRequest& request, const std::string& value);

    // Python's keyword: the name with '-' -> '_'.
    std::string keyword() const;
};

// Every option, in the order --help lists them.
const std::vector<ModelOption>& model_options();
// The option called `name` (the flag without "--"); throws UsageError when there is none.
const ModelOption& model_option(const std::string& name);
// The help of the model's name (the command line's MODEL, vitreg.Model's first argument).
const std::string& model_name_help();

}  // namespace vitreg
