#pragma once
// A checkpoint on disk: a safetensors file (plus a sibling config.json for HF), its layout,
// and the Config resolved from it. Hands out tensors by their canonical (dinov2) names; the
// layout adapters only translate names.
#include <memory>
#include <string>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/safetensors.hpp"

namespace vitreg {

class Checkpoint {
public:
    // `path`: a .safetensors file or a folder holding model.safetensors (+ config.json).
    explicit Checkpoint(const std::string& path, const ConfigOverrides& overrides = {});

    const Config& config() const { return config_; }
    const std::string& path() const { return file_->path(); }
    const SafetensorsFile& file() const { return *file_; }

    bool has(const std::string& canonical) const;
    // The tensor(s) stored under a canonical name: one view, or several to be concatenated
    // along dim 0 (HF keeps query/key/value apart). Throws CheckpointError when missing.
    std::vector<const TensorView*> parts(const std::string& canonical) const;
    // The tensor as float32 after checking its shape (concatenating parts). Throws a
    // CheckpointError naming the tensor, the expected and the stored shape.
    std::vector<float> load(const std::string& canonical, const std::vector<std::int64_t>& shape) const;

private:
    std::vector<std::string> source_names(const std::string& canonical) const;
    Config resolve(const std::string& dir, const ConfigOverrides& overrides);

    std::unique_ptr<SafetensorsFile> file_;
    std::string prefix_;  // e.g. "dinov2." for HF task models
    Config config_;
};

// Finds a model given as a file, a folder, the name of a shipped checkpoint (searched in
// $VITREG_WEIGHTS, the source tree's weights/ and the installed share/vitreg/weights), or a
// Hugging Face hub id "ORG/NAME[@REVISION]" already in the local cache ($HF_HUB_CACHE,
// $HF_HOME/hub or ~/.cache/huggingface/hub; nothing is downloaded).
std::string resolve_model_path(const std::string& spec);
// Names of the shipped checkpoints found on the search path.
std::vector<std::string> shipped_models();

}  // namespace vitreg
