#pragma once
// What opens a model: the checkpoint as named and every setting the front ends (the command line,
// Python's vitreg.Model) take for it. Both fill a ModelRequest from the one table of options
// (model_options.hpp), or from a configuration word (ModelSpec), and call open_model.
#include <cstdint>
#include <map>
#include <string>

#include "vitreg/config.hpp"
#include "vitreg/image.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/model.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/precision.hpp"

namespace vitreg {

// The options as a front end took them: an option's name in model_options() -> its value as text.
using OptionValues = std::map<std::string, std::string>;

struct ModelRequest {
    std::string model;          // a file, folder, shipped name, hub id or torch hub name (resolve_model_path)
    ConfigOverrides overrides;  // attention, pos-interp, the state dict's key, the header limits
    PrecisionOptions precision;
    Intervention intervention;  // none when empty
    std::int64_t max_memory = 0;  // the opened model's memory cap (bytes; 0: default_memory_cap())
    // What the front end runs the opened model with; open_model itself does not use them.
    int threads = 0;  // 0 = all cores
    std::int64_t max_tokens = kDefaultMaxTokens;
    ImageLimits image_limits;

    // `model` (which may carry ModelSpec suffixes) with the settings `values` name; an empty text
    // leaves its option as it is.
    // Throws UsageError for a name that is not an option, a number out of the option's range,
    // or a value the option does not take.
    static ModelRequest from_options(const std::string& model, const OptionValues& values);
    // A configuration named on one word ("MODEL@softmax1@int8@evict=sink", ModelSpec): the
    // settings its suffixes name, over `base`'s (the defaults' without one).
    static ModelRequest from_spec(const ModelSpec& spec, ModelRequest base);
    static ModelRequest from_spec(const ModelSpec& spec) { return from_spec(spec, ModelRequest{}); }
};

// Resolves the checkpoint's name, loads and packs its weights and applies the intervention
// (Model::load, Model::with: their errors). The loader's notes are in config().notes.
Model open_model(const ModelRequest& request);

}  // namespace vitreg
