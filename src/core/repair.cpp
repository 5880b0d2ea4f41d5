#include "vitreg/repair.hpp"

#include <cstdlib>
#include <tuple>
#include <utility>

#include "core/defect_direction_rows.hpp"
#include "core/repairs/repair_type.hpp"
#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The kind whose suffix `word` is ("NAME=..."); null when none.
const RepairType* type_of(const std::string& word) {
    for (const RepairType* t : repair_types())
        if (starts_with(word, t->name + "=")) return t;
    return nullptr;
}

}  // namespace

bool looks_like_layers(const std::string& text) {
    if (text == "all" || text == "last") return true;
    for (const auto& item : split(text, ','))
        if (!parse_integer(item, -4096, 4096)) return false;
    return true;
}

std::pair<std::string, std::string> file_and_layers(const std::string& spec) {
    const auto colon = spec.rfind(':');
    if (colon != std::string::npos && looks_like_layers(spec.substr(colon + 1))) return {spec.substr(0, colon), spec.substr(colon + 1)};
    return {spec, ""};
}

std::shared_ptr<const RepairCalibration> read_calibration(const std::string& word, const std::string& file) {
    if (file.empty()) throw UsageError("@" + word + ": names no file (made by vitreg calibrate-bias)");
    return std::make_shared<const RepairCalibration>(RepairCalibration::read(file));
}

float* patch_rows(float* x, const StreamShape& s, int b) {
    return x + (static_cast<std::size_t>(b) * s.tokens + s.first_patch) * s.dim;
}

std::string repair_help() {
    std::string text;
    for (const RepairType* t : repair_types()) text += (text.empty() ? "" : ", ") + t->help;
    return text;
}

std::string repair_forms() {
    std::string text;
    for (const RepairType* t : repair_types()) text += (text.empty() ? "" : ", ") + t->form;
    return text;
}

bool Repair::names_repair(const std::string& w) { return type_of(w) != nullptr; }

Repair Repair::parse(const std::string& word) {
    Repair r;
    r.type = type_of(word);
    if (!r.type) throw UsageError("@" + word + ": not a repair (" + repair_forms() + ")");
    r.type->parse(r, word.substr(r.type->name.size() + 1), word);
    return r;
}

std::string Repair::to_string() const { return type->name + "=" + type->value_text(*this); }

std::string Repair::kind() const { return type->name; }

std::vector<int> Repair::layers_of(int depth) const { return type->layers_of(*this, depth); }

void Repair::validate(const Config& c) const {
    const std::string name = "@" + to_string();
    try {
        layers_of(c.depth);
    } catch (const UsageError& e) {
        throw UsageError(name + ": " + e.what());
    }
    if (type->validate) type->validate(*this, c);
    if (directions && (directions->layers != c.depth || directions->dim != c.dim))
        throw UsageError(name + ": " + file + " holds defect directions for " + std::to_string(directions->layers) +
                         " layers of width " + std::to_string(directions->dim) + ", the model has " + std::to_string(c.depth) +
                         " of width " + std::to_string(c.dim));
    if (!calibration) return;
    const RepairCalibration& cal = *calibration;
    if (cal.dim != c.dim || cal.depth != c.depth || cal.registers != c.registers)
        throw UsageError(name + ": " + file + " was calibrated on a model of " + std::to_string(cal.depth) + " blocks, width " +
                         std::to_string(cal.dim) + " and " + std::to_string(cal.registers) + " registers; this one has " +
                         std::to_string(c.depth) + ", " + std::to_string(c.dim) + " and " + std::to_string(c.registers));
}

std::vector<std::array<int, 2>> denoise_shifts(int count) {
    std::vector<std::array<int, 2>> out{{0, 0}};
    for (int r = 1; static_cast<int>(out.size()) < count; ++r) {
        // (0,r), (r,0), (-r,-r) first: three shifts pointing every way, so that from K = 4 on every
        // cell is seen by two forwards at least and every grid position observes two.
        const std::array<std::array<int, 2>, 8> ring{{{0, r}, {r, 0}, {-r, -r}, {0, -r}, {-r, 0}, {r, r}, {r, -r}, {-r, r}}};
        for (const auto& s : ring)
            if (static_cast<int>(out.size()) < count) out.push_back(s);
    }
    return out;
}

}  // namespace vitreg
