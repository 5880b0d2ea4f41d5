// A query's pixel options: the ones the index's features were extracted with, as run.json records
// them, so that a query image becomes the vector its own extract would have made.
#include <sstream>

#include "vitreg/error.hpp"
#include "vitreg/model.hpp"
#include "vitreg/pixel_options.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

std::optional<ResizeSpec> extracted_pixels(const nlohmann::json& info) {
    const auto source = info.find("source");
    if (source == info.end() || !source->is_object()) return std::nullopt;
    const auto run = source->find("run");
    if (run == source->end() || !run->is_object() || !run->contains("resize") || !(*run)["resize"].is_string())
        return std::nullopt;
    // ResizeSpec::to_string: the geometry, then "NAME=VALUE" or "NAME" (a flag) per option not at its default
    const std::string text = (*run)["resize"].get<std::string>();
    const auto bad = [&](const std::string& why) {
        return UsageError("index.json: source.run.resize '" + text + "' " + why + " (is the index from another vitreg?)");
    };
    std::istringstream words(text);
    std::string word;
    if (!(words >> word)) throw bad("is empty");
    ResizeSpec r;
    try {
        r = ResizeSpec::parse(word);
        while (words >> word) {
            const auto eq = word.find('=');
            const std::string name = word.substr(0, eq);
            const auto* spec = find_option(pixel_option_table(), name);
            if (!spec || name == "resize") throw bad("names no pixel option '" + name + "'");
            const bool flag = spec->info.type == ValueType::Flag;
            if (flag != (eq == std::string::npos)) throw bad("gives '" + word + "' a value it does not take");
            spec->apply(r, spec->info.parse(flag ? "true" : word.substr(eq + 1), name), name);
        }
    } catch (const UsageError& e) {
        if (std::string(e.what()).rfind("index.json", 0) == 0) throw;
        throw bad(std::string("does not read back: ") + e.what());
    }
    return r;
}

ResizeSpec query_pixels(const nlohmann::json& info, const Model& model, const ResizeSpec& requested,
                        const std::vector<std::pair<std::string, std::string>>& given) {
    const auto extracted = extracted_pixels(info);
    if (!extracted) return requested;
    // Compared as the model resolves them: naming the checkpoint's own pipeline contradicts nothing.
    const ResizeSpec want = requested.for_model(model.config()), was = extracted->for_model(model.config());
    for (const auto& [name, label] : given) {
        const auto* spec = find_option(pixel_option_table(), name);
        if (!spec) throw Error("internal: query_pixels: no pixel option '" + name + "'");
        const std::string asked = option_text(spec->get(want)), used = option_text(spec->get(was));
        if (asked != used)
            throw UsageError(label + " " + asked + " contradicts the index's features, extracted with " + label + " " +
                             used + " (index.json source.run); leave it out to use the extract's");
    }
    return *extracted;
}

}  // namespace vitreg
