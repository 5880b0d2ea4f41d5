// The fuzz targets of what the repairs and interventions read: calibration, defects and neuron
// files, and the model-name suffixes that name them (targets.hpp).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "core/defect_direction_rows.hpp"
#include "fuzz_files.hpp"
#include "targets.hpp"
#include "vitreg/analysis/defects.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/register_neuron_file.hpp"
#include "vitreg/repair.hpp"

namespace vitreg::fuzz {

void calibration_file(const std::uint8_t* data, std::size_t size) {
    const std::string path = scratch() + "/bias.safetensors";
    put(path, data, size);
    try {
        const RepairCalibration c = RepairCalibration::read(path);
        if (c.bias.size() != static_cast<std::size_t>(c.grid) * c.grid * c.dim ||
            c.register_means.size() != static_cast<std::size_t>(c.depth) * c.registers * c.dim || c.layer >= c.depth)
            std::abort();  // what was read disagrees with its own shape
    } catch (const Error&) {
    }
}

void defect_directions_file(const std::uint8_t* data, std::size_t size) {
    const std::string path = scratch() + "/defects.safetensors";
    put(path, data, size);
    try {
        const DefectDirections d = read_defects(path);
        if (d.directions.size() != static_cast<std::size_t>(d.layers) * d.dim ||
            d.singular_values.size() != static_cast<std::size_t>(d.layers) * d.top)
            std::abort();
        (void)d.fit_description();
    } catch (const Error&) {
    }
    try {
        const DefectDirectionRows rows = read_defect_direction_rows(path);
        if (rows.rows.size() != static_cast<std::size_t>(rows.layers) * rows.dim) std::abort();
    } catch (const Error&) {
    }
}

void neurons_file(const std::uint8_t* data, std::size_t size) {
    const std::string path = scratch() + "/neurons.json";
    put(path, data, size);
    try {
        (void)read_register_neurons(path);
    } catch (const Error&) {
    }
    try {
        (void)parse_register_neurons(path + ":3");
    } catch (const Error&) {
    }
}

namespace {

// Each parsed repair against the model the seeds' files were made for (2 blocks of width 8, 2
// registers), through the layer lists' own parser; a layer out of range is refused by name.
void check_repairs(const std::vector<Repair>& repairs) {
    Config config;
    config.depth = 2;
    config.dim = 8;
    config.registers = 2;
    for (const Repair& r : repairs) {
        try {
            r.validate(config);
            for (const int layer : r.layers_of(config.depth))
                if (layer < 0 || layer >= config.depth) std::abort();
        } catch (const Error&) {
        }
    }
}

}  // namespace

void model_name(const std::uint8_t* data, std::size_t size) {
    static const std::string dir = [] {
        const std::string d = scratch() + "/names";
        std::filesystem::create_directories(d);
        for (const auto& [file, from] : {std::pair<std::string, std::string>{"neurons.json", "neurons/selected.json"},
                                         {"bias.safetensors", "calibration/registers2.safetensors"},
                                         {"defects.safetensors", "defects/two_layers.safetensors"}}) {
            const auto bytes = seed(from);
            put(d + "/" + file, bytes.data(), bytes.size());
        }
        return d;
    }();
    const InFolder in(dir);
    try {
        const ModelSpec spec = ModelSpec::parse(std::string(reinterpret_cast<const char*>(data), size));
        const std::string text = spec.to_string();
        if (ModelSpec::parse(text).to_string() != text) std::abort();  // to_string must parse back
        (void)spec.label();
        if (spec.intervention) check_repairs(spec.intervention->repairs);
    } catch (const Error&) {
    }
}

}  // namespace vitreg::fuzz
