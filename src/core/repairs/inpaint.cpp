// @inpaint=artifacts[:LAYERS] | @inpaint=directions:FILE[:LAYERS]: flagged patches replaced by the
// mean of their unflagged neighbours after each chosen block (vitreg/repair.hpp).
#include "core/defect_direction_rows.hpp"
#include "core/repairs/repair_type.hpp"
#include "vitreg/error.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

void parse(Repair& r, const std::string& value, const std::string& word) {
    r.layers = "last";
    if (starts_with(value, "directions:") || value == "directions") {
        std::string layers;
        std::tie(r.file, layers) = file_and_layers(value.size() > 11 ? value.substr(11) : "");
        if (!layers.empty()) r.layers = layers;
        if (r.file.empty())
            throw UsageError("@" + word + ": names no defects file (expected @inpaint=directions:FILE[:LAYERS], FILE from vitreg defects)");
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
}

std::string value_text(const Repair& r) {
    return (r.directions ? "directions:" + r.file : std::string("artifacts")) + (r.layers == "last" ? "" : ":" + r.layers);
}

std::vector<int> layers_of(const Repair& r, int depth) { return resolve_layers(r.layers, depth); }

void edit(const Repair& r, int layer, float* x, const StreamShape& s, const Config&, const ShiftedStreams*) {
    const int count = s.grid_h * s.grid_w;
    for (int b = 0; b < s.batch; ++b) {
        float* p = patch_rows(x, s, b);
        inpaint_flagged(p, s.grid_h, s.grid_w, s.dim,
                        r.directions ? flag_direction_patches(p, count, s.dim, r.directions->row(layer))
                                     : flag_artifact_patches(p, count, s.dim));
    }
}

}  // namespace

const RepairType& inpaint_repair() {
    static const RepairType type{
        "inpaint", "inpaint=artifacts",
        "@inpaint=artifacts[:LAYERS] (flagged patches -> mean of unflagged neighbours; 1 forward per image), "
        "@inpaint=directions:FILE[:LAYERS] (the same, flagged by |cos| with the defect directions of vitreg defects)",
        parse, value_text, layers_of, edit, nullptr};
    return type;
}

}  // namespace vitreg
