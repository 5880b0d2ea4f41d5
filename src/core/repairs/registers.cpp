// @registers=mean:FILE[:LAYERS] | @registers=zero[:LAYERS]: the register tokens replaced by their
// calibrated means, or zero (the control), after each chosen block (vitreg/repair.hpp).
#include <algorithm>

#include "core/repairs/repair_type.hpp"
#include "vitreg/error.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

void parse(Repair& r, const std::string& value, const std::string& word) {
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
}

std::string value_text(const Repair& r) { return (r.zero ? "zero" : "mean:" + r.file) + (r.layers == "all" ? "" : ":" + r.layers); }

std::vector<int> layers_of(const Repair& r, int depth) { return resolve_layers(r.layers, depth); }

void edit(const Repair& r, int layer, float* x, const StreamShape& s, const Config&, const ShiftedStreams*) {
    const std::size_t n = static_cast<std::size_t>(s.registers) * s.dim;
    for (int b = 0; b < s.batch; ++b) {
        float* reg = x + (static_cast<std::size_t>(b) * s.tokens + s.first_register) * s.dim;
        if (r.zero) std::fill(reg, reg + n, 0.0f);
        else std::copy_n(r.calibration->register_means.data() + static_cast<std::size_t>(layer) * n, n, reg);
    }
}

void validate(const Repair& r, const Config& c) {
    if (c.registers == 0) throw UsageError("@registers=" + value_text(r) + ": the model has no register tokens to replace");
}

}  // namespace

const RepairType& registers_repair() {
    static const RepairType type{"registers", "registers=mean:FILE|zero",
                                 "@registers=mean:FILE[:LAYERS] or @registers=zero[:LAYERS] (1 forward)", parse,
                                 value_text, layers_of, edit, validate};
    return type;
}

}  // namespace vitreg
