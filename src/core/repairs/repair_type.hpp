#pragma once
// A repair kind (vitreg/repair.hpp) as a record: its suffix word, how its text reads and is written
// back, the blocks it edits after and its edit of the residual stream. Each kind lives in its own
// file in src/core/repairs/; registry.cpp lists them. Repair and the forward ask the record and
// never the kind's name.
#include <string>
#include <utility>
#include <vector>

#include "core/repair_edits.hpp"
#include "vitreg/repair.hpp"

namespace vitreg {

struct RepairType {
    std::string name;  // the suffix's word: @NAME=...
    std::string form;  // its short form, as a list of the repairs gives it: "denoise=shift:K"
    std::string help;  // every form and what it costs, for the model name's help
    // Fills `r` from the text after "NAME=" (`word`: the whole suffix, for errors); throws UsageError.
    void (*parse)(Repair& r, const std::string& value, const std::string& word) = nullptr;
    std::string (*value_text)(const Repair& r) = nullptr;  // what parse reads back
    std::vector<int> (*layers_of)(const Repair& r, int depth) = nullptr;
    // Edits the stream x after block `layer` (one of layers_of); `shifted`: a denoise's other forwards.
    void (*edit)(const Repair& r, int layer, float* x, const StreamShape& s, const Config& c,
                 const ShiftedStreams* shifted) = nullptr;
    // What only this kind refuses on a model (null: nothing beyond the layers and the files' shapes).
    void (*validate)(const Repair& r, const Config& c) = nullptr;
};

// Every kind, in the order the model name's help lists them.
const std::vector<const RepairType*>& repair_types();

// What the kinds' texts share.
// A layer list as resolve_layers takes it, checked for its form only (the depth comes later).
bool looks_like_layers(const std::string& text);
// "FILE[:LAYERS]" as (FILE, LAYERS): the layers after the last ':' when they read as a layer list
// (a path may hold ':' itself); LAYERS empty when there are none.
std::pair<std::string, std::string> file_and_layers(const std::string& spec);
// The calibration `file` of vitreg calibrate-bias; throws UsageError naming `word` when there is none.
std::shared_ptr<const RepairCalibration> read_calibration(const std::string& word, const std::string& file);
// Image b's patch tokens in the stream.
float* patch_rows(float* x, const StreamShape& s, int b);

}  // namespace vitreg
