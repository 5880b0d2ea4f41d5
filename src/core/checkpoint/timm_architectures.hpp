#pragma once
// timm's own model definitions as a table (timm_architectures.inc, written by
// scripts/timm_architectures.py from timm's vision_transformer.py, deit.py and eva.py): what a
// hub config.json's `architecture` builds beyond the `model_args` it repeats.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint/config_keys.hpp"

namespace vitreg::source {

// An architecture as timm builds it: the definition's forward arguments with the hub config's
// model_args over them (timm's `dict(model_args, **kwargs)`).
struct TimmArchitecture {
    std::string name;
    std::string model_class;  // VisionTransformer, VisionTransformerDistilled or Eva
    nlohmann::json args;      // an object
    nlohmann::json model_args;  // the hub config's own (an object, maybe empty)

    // An argument's value (null when the class has no such argument).
    const nlohmann::json& arg(const std::string& key) const;
    // Whether the hub config's model_args states `key` (else timm's definition does).
    bool stated(const std::string& key) const { return model_args.contains(key); }
    // Where `key`'s value comes from, for messages: "model_args" or "timm's definition".
    std::string origin(const std::string& key) const;
};

// The architecture a timm hub config.json (`hub`, read from `file`) names, model_args applied.
// Throws ConfigError naming the file, the key and the value: an architecture timm's table does not
// hold, a model_args that is not an object, a key the model class does not take, an argument
// vitreg's forward does not run.
TimmArchitecture timm_architecture(const nlohmann::json& hub, const std::string& file);

// Every parameter of timm's `model_class` ("VisionTransformer" or "Eva") __init__ with what vitreg
// does with it: read (or held by the tensors), inert at inference, or run only at some values. A
// model_args key outside it is refused by name, file and value, as timm's TypeError would.
std::vector<ConfigKey> timm_parameter_uses(const std::string& model_class);

// The parameters of `model_class`'s __init__ at the table's timm commit (generated, for tests).
std::vector<std::string> timm_parameters(const std::string& model_class);

// Every architecture the table holds, in name order (for tests and `vitreg` docs).
std::vector<std::string> timm_architecture_names();

}  // namespace vitreg::source
