// The file of `vitreg calibrate-bias`: safetensors with the per-position mean map `bias`
// [grid*grid, dim] and `register_means` [depth, registers, dim], its facts in the metadata.
#include <nlohmann/json.hpp>

#include "core/parse_number.hpp"
#include "core/safetensors.hpp"
#include "vitreg/error.hpp"
#include "vitreg/repair.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

constexpr const char* kRepairFormat = "vitreg-repair-calibration";

}  // namespace

void RepairCalibration::write(const std::string& path) const {
    std::map<std::string, ArrayRef> tensors{
        {"bias", {{static_cast<std::int64_t>(grid) * grid, dim}, bias.data()}}};
    if (registers > 0) tensors["register_means"] = {{depth, registers, dim}, register_means.data()};
    write_safetensors(path, tensors,
                      {{"format", kRepairFormat},
                       {"layer", std::to_string(layer)},
                       {"depth", std::to_string(depth)},
                       {"registers", std::to_string(registers)},
                       {"source", source},
                       {"images", nlohmann::json(images).dump()}});
}

RepairCalibration RepairCalibration::read(const std::string& path) {
    const auto fail = [&](const std::string& why) {
        return UsageError(path + ": not a repair calibration of vitreg calibrate-bias: " + why);
    };
    std::unique_ptr<SafetensorsFile> f;
    try {
        f = std::make_unique<SafetensorsFile>(path);
    } catch (const Error& e) {
        throw fail(e.what());
    }
    const auto& meta = f->metadata();
    const auto field = [&](const char* key) {
        const auto at = meta.find(key);
        if (at == meta.end()) throw fail(std::string("no '") + key + "' in its metadata");
        return at->second;
    };
    if (field("format") != kRepairFormat) throw fail("format '" + field("format") + "'");
    RepairCalibration c;
    const auto number = [&](const char* key) {
        const auto v = parse_integer(field(key), 0, 1 << 20);
        if (!v) throw fail(std::string("'") + key + "' is not a count");
        return static_cast<int>(*v);
    };
    c.layer = number("layer");
    c.depth = number("depth");
    c.registers = number("registers");
    c.source = field("source");
    try {
        c.images = nlohmann::json::parse(field("images")).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
        throw fail("'images' is not a JSON list of names");
    }
    if (!f->has("bias")) throw fail("no tensor 'bias'");
    const TensorView& bias = f->get("bias");
    if (bias.shape.size() != 2) throw fail("'bias' is " + bias.shape_string() + ", not [cells, dim]");
    c.dim = static_cast<int>(bias.shape[1]);
    while (static_cast<std::int64_t>(c.grid + 1) * (c.grid + 1) <= bias.shape[0]) ++c.grid;
    if (static_cast<std::int64_t>(c.grid) * c.grid != bias.shape[0] || c.grid == 0)
        throw fail("'bias' has " + std::to_string(bias.shape[0]) + " cells, not a square grid");
    if (c.layer >= c.depth) throw fail("layer " + std::to_string(c.layer) + " of " + std::to_string(c.depth));
    c.bias = bias.to_float();
    if (c.registers > 0) {
        if (!f->has("register_means")) throw fail("no tensor 'register_means'");
        const TensorView& r = f->get("register_means");
        if (r.shape != std::vector<std::int64_t>{c.depth, c.registers, c.dim})
            throw fail("'register_means' is " + r.shape_string() + ", not [depth, registers, dim]");
        c.register_means = r.to_float();
    }
    return c;
}

}  // namespace vitreg
