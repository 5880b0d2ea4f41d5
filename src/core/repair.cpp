#include "vitreg/repair.hpp"

#include <cstdlib>
#include <tuple>
#include <utility>

#include "core/defect_direction_rows.hpp"
#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A layer list as resolve_layers takes it, checked for its form only (the depth comes later).
bool looks_like_layers(const std::string& text) {
    if (text == "all" || text == "last") return true;
    for (const auto& item : split(text, ','))
        if (!parse_integer(item, -4096, 4096)) return false;
    return true;
}

// "FILE[:LAYERS]" as (FILE, LAYERS): the layers after the last ':' when they read as a layer list
// (a path may hold ':' itself); LAYERS empty when there are none.
std::pair<std::string, std::string> file_and_layers(const std::string& spec) {
    const auto colon = spec.rfind(':');
    if (colon != std::string::npos && looks_like_layers(spec.substr(colon + 1))) return {spec.substr(0, colon), spec.substr(colon + 1)};
    return {spec, ""};
}

std::shared_ptr<const RepairCalibration> read_calibration(const std::string& word, const std::string& file) {
    if (file.empty()) throw UsageError("@" + word + ": names no file (made by vitreg calibrate-bias)");
    return std::make_shared<const RepairCalibration>(RepairCalibration::read(file));
}

}  // namespace

bool Repair::names_repair(const std::string& w) {
    return starts_with(w, "inpaint=") || starts_with(w, "denoise=") || starts_with(w, "debias=") ||
           starts_with(w, "registers=");
}

Repair Repair::parse(const std::string& word) {
    Repair r;
    const auto eq = word.find('=');
    const std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
    if (starts_with(word, "inpaint=")) {
        r.kind = RepairKind::Inpaint;
        r.layers = "last";
        if (starts_with(value, "directions:") || value == "directions") {
            std::string layers;
            std::tie(r.file, layers) = file_and_layers(value.size() > 11 ? value.substr(11) : "");
            if (!layers.empty()) r.layers = layers;
            if (r.file.empty()) throw UsageError("@" + word + ": names no defects file (expected @inpaint=directions:FILE[:LAYERS], FILE from vitreg defects)");
            try {
                r.directions = std::make_shared<const DefectDirectionRows>(read_defect_direction_rows(r.file));
            } catch (const Error& e) {
                throw UsageError("@" + word + ": " + e.what());
            }
        } else if (value != "artifacts") {
            if (!starts_with(value, "artifacts:") || !looks_like_layers(value.substr(10)))
                throw UsageError("@" + word + ": expected @inpaint=artifacts[:LAYERS] or @inpaint=directions:FILE[:LAYERS] "
                                 "(LAYERS: last, all or i,j,...)");
            r.layers = value.substr(10);
        }
    } else if (starts_with(word, "denoise=")) {
        r.kind = RepairKind::Denoise;
        const auto parts = split(value, ':');
        const auto k = parts.size() >= 2 ? parse_integer(parts[1], 2, kMaxDenoiseShifts) : std::nullopt;
        if (parts[0] != "shift" || !k || parts.size() > 3 || (parts.size() == 3 && parts[2] != "median"))
            throw UsageError("@" + word + ": expected @denoise=shift:K or shift:K:median (K in 2.." +
                             std::to_string(kMaxDenoiseShifts) + ")");
        r.shifts = static_cast<int>(*k);
        r.median = parts.size() == 3;
    } else if (starts_with(word, "debias=")) {
        r.kind = RepairKind::Debias;
        r.file = value;
        r.calibration = read_calibration(word, value);
    } else if (starts_with(word, "registers=")) {
        r.kind = RepairKind::Registers;
        r.layers = "all";
        std::string layers;  // after the last ':' of "zero:LAYERS" or "mean:FILE:LAYERS"
        if (value == "zero" || starts_with(value, "zero:")) {
            r.zero = true;
            if (value != "zero") layers = value.substr(5);
            if (value != "zero" && !looks_like_layers(layers))
                throw UsageError("@" + word + ": '" + layers + "' is not a layer list (last, all or i,j,...)");
        } else if (starts_with(value, "mean:")) {
            std::tie(r.file, layers) = file_and_layers(value.substr(5));
            r.calibration = read_calibration(word, r.file);
        } else {
            throw UsageError("@" + word + ": expected @registers=mean:FILE[:LAYERS] or @registers=zero[:LAYERS]");
        }
        if (!layers.empty()) r.layers = layers;
    } else {
        throw UsageError("@" + word + ": not a repair (inpaint=, denoise=, debias=, registers=)");
    }
    return r;
}

std::string Repair::to_string() const {
    switch (kind) {
        case RepairKind::Inpaint:
            return (directions ? "inpaint=directions:" + file : std::string("inpaint=artifacts")) +
                   (layers == "last" ? "" : ":" + layers);
        case RepairKind::Denoise: return "denoise=shift:" + std::to_string(shifts) + (median ? ":median" : "");
        case RepairKind::Debias: return "debias=" + file;
        case RepairKind::Registers:
            return std::string("registers=") + (zero ? "zero" : "mean:" + file) + (layers == "all" ? "" : ":" + layers);
    }
    return "";
}

std::vector<int> Repair::layers_of(int depth) const {
    switch (kind) {
        case RepairKind::Inpaint:
        case RepairKind::Registers: return resolve_layers(layers, depth);
        case RepairKind::Denoise: return {depth - 1};
        case RepairKind::Debias: return {calibration->layer};
    }
    return {};
}

void Repair::validate(const Config& c) const {
    const std::string name = "@" + to_string();
    try {
        layers_of(c.depth);
    } catch (const UsageError& e) {
        throw UsageError(name + ": " + e.what());
    }
    if (kind == RepairKind::Registers && c.registers == 0)
        throw UsageError(name + ": the model has no register tokens to replace");
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
