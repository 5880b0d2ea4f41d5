#pragma once
// A checkpoint source: one format that stores a ViT's weights (DINOv2's hub files, HF's Dinov2Model,
// OpenCLIP, ...) as a record: how its files are recognized, what its tensors are called, which
// configs lie beside them and what it assumes where they are silent. Each source lives in its own
// file; registry.cpp lists them in match order. Checkpoint::resolve (resolve.cpp) asks the record
// and never the source's name.
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/name_table.hpp"
#include "core/checkpoint/notes.hpp"
#include "core/checkpoint/side_files.hpp"
#include "vitreg/config.hpp"
#include "vitreg/tensor_file.hpp"

namespace vitreg::source {

// Heads while a Config is resolved, until a file states them (a stated 0 is refused, not guessed over).
constexpr int kHeadsUnstated = -1;

struct Source {
    std::string name;  // what `vitreg info` prints as the layout
    // Where the file's names start when the file is this source's, else nullopt.
    std::optional<std::string> (*match)(const TensorFile& f) = nullptr;
    // Canonical names -> stored ones; a few sources pick them from the tensors.
    NameTable (*names)(const TensorFile& f, const std::string& prefix) = nullptr;
    // The configs beside the weights.
    SideFormat side_files = SideFormat::TimmHubConfig;
    bool reads_preprocessor = false;  // preprocessor_config.json (HF's image processors)
    // HF sources: the config.json model_type and architectures that name this source's tensors.
    std::vector<std::string> hf_model_types, hf_architectures;
    // timm sources: the timm model class whose names the tensors carry (timm_architectures.inc's),
    // and how a refusal names them (the config and the tensors must tell the same class).
    std::string timm_class;
    std::string timm_names;
    // How the pos_embed rows are told in an error ("1+M*M": a class-token row first).
    std::string pos_rows = "1+M*M";

    // Defaults where the file is silent (the tensor facts and the family are known by then).
    Family (*family)(const Config& c, const SideFiles& side) = nullptr;
    Positions (*positions)(const Config& c, const SideFiles& side, Notes& notes) = nullptr;
    PosInterp (*pos_interp)(const Config& c, const SideFiles& side) = nullptr;
    std::optional<PixelPipeline> pipeline;      // none: timm's for the timm families, else torchvision's
    void (*pixel_defaults)(Config& c) = nullptr;  // after the family's
    // Refuses a key of its configs that it neither reads nor knows to be inert (config_keys.hpp).
    void (*check_keys)(const SideFiles& side) = nullptr;
    // Names its configs decide (open_clip's final_ln_after_pool moves ln_post after the pool).
    void (*side_names)(const SideFiles& side, NameTable& t) = nullptr;
    // The activation its config files state or its origin implies (SwiGLU comes from the tensors).
    void (*activation)(Config& c, const SideFiles& side, Notes& notes) = nullptr;
    // What its own configs state beyond the keys every source shares (open_clip's pool_type, eps).
    void (*read_config)(Config& c, const SideFiles& side, Notes& notes) = nullptr;
    // timm's `head` [E, D] may be the CLIP projection (true for a CLIP tower).
    bool (*head_is_projection)(const Config& c, const SideFiles& side) = nullptr;
    // What the source alone knows once the files have spoken: heads (when nothing stated them)
    // and the rotary base from its tensors.
    void (*finish)(const TensorFile& f, const std::string& prefix, Config& c, Notes& notes) = nullptr;
};

// Every source, in match order (the first whose match holds wins).
const std::vector<Source>& sources();

// The source of a file and where its names start; null when no source knows the file.
const Source* match_source(const TensorFile& f, std::string& prefix);

// Refuses a checkpoint whose config.json or open_clip_config.json names a model vitreg does not
// run, or one the tensors' source contradicts (`matched`: null when no source knows the tensors).
void refuse_unknown_model(const std::string& dir, const Source* matched, int depth_limit);

// The name after `marker` where a file's names start: the first name ending in `marker`, less it.
std::optional<std::string> prefix_before(const TensorFile& f, const std::string& marker);

}  // namespace vitreg::source
