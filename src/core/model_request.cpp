#include "vitreg/model_request.hpp"

#include <filesystem>
#include <optional>

#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/forward_memory.hpp"
#include "vitreg/model_options.hpp"
#include "core/parse_number.hpp"

namespace vitreg {

namespace {

// A suffix and an option that both set the normalizer or the precision must agree: which one
// was meant cannot be guessed ("m@bf16" with --precision int8).
void refuse_contradiction(const std::string& model, const ModelSpec& spec, const ModelRequest& r) {
    if (spec.precision && spec.precision->precision != r.precision.precision)
        throw UsageError(model + ": the name asks for " + to_string(spec.precision->precision) + " and --precision for " +
                         to_string(r.precision.precision) + "; give one");
    if (spec.attention && spec.attention != r.overrides.attention)
        throw UsageError(model + ": the name asks for " + to_string(*spec.attention) + " attention and --attention for " +
                         (r.overrides.attention ? to_string(*r.overrides.attention) : std::string("the checkpoint's")) +
                         "; give one");
}

}  // namespace

ModelRequest ModelRequest::from_options(const std::string& model, const OptionValues& values) {
    // The model's name may carry a configuration's suffixes ("m.safetensors@inpaint=artifacts");
    // a name that is a file as written keeps its '@'.
    ModelRequest r;
    r.model = model;
    std::error_code ec;  // a name the file system cannot look up (too long) is not a file
    std::optional<ModelSpec> spec;
    if (model.find('@') != std::string::npos && !std::filesystem::exists(model, ec)) spec = ModelSpec::parse(model);
    if (spec) r = from_spec(*spec);
    for (const auto& named : values) model_option(named.first);  // refuses a name that is not an option
    for (const ModelOption& option : model_options()) {
        const auto given = values.find(option.name);
        if (given == values.end() || given->second.empty()) continue;
        const std::string& text = given->second;
        // The command line's parser has checked numbers already: only Python's keywords arrive here
        // unchecked, so the message names the keyword (and the flag beside it).
        if (option.kind == OptionKind::Integer && !parse_integer(text, option.min, option.max))
            throw UsageError(option.keyword() + "=" + text + ": expected an integer in " + std::to_string(option.min) + ".." +
                             std::to_string(option.max) + " (--" + option.name + " on the command line)");
        option.apply(r, text);
    }
    if (spec) refuse_contradiction(model, *spec, r);
    return r;
}

ModelRequest ModelRequest::from_spec(const ModelSpec& spec, ModelRequest base) {
    base.model = spec.model;
    if (spec.attention) base.overrides.attention = spec.attention;
    if (spec.precision) base.precision = *spec.precision;
    if (spec.intervention) base.intervention = *spec.intervention;
    return base;
}

Model open_model(const ModelRequest& request) {
    const std::string path = resolve_model_path(request.model);
    // The header and configs alone say whether the weights and one image fit the cap: nothing of
    // the weights is read before the refusal. A quantized file asked for at another precision is
    // refused first, so that the memory estimate is never that of a precision it cannot run.
    const Checkpoint header(path, request.overrides, CheckpointRead::HeaderOnly);
    refuse_other_precision(header, request.precision);
    refuse_what_cannot_fit(request.model, header.config(), request.precision.precision,
                           request.max_memory > 0 ? request.max_memory : default_memory_cap(), request.threads,
                           header.quantization().quantized());
    Model m = Model::load(path, request.overrides, request.precision);
    if (!request.intervention.empty()) m = m.with(request.intervention);
    return m.with_memory_cap(request.max_memory);
}

}  // namespace vitreg
