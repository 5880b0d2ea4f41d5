#pragma once
// What `vitreg info` says about a checkpoint without loading it: the resolved Config, the shapes
// and dtypes of the model's tensors and the memory their weights take at each precision, all from
// the file's header and the configs beside it. No tensor is converted or packed; only the few
// config-bearing ones resolution reads anyway (DINOv3's rope periods, a timm head's bias) are
// touched, so a multi-GB checkpoint is described in a few MB.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vitreg/checkpoint.hpp"
#include "vitreg/config.hpp"
#include "vitreg/tensor_file.hpp"

namespace vitreg {

struct TensorShape {
    std::string name;  // as stored
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::int64_t numel = 0;
    // A weight matrix the forward packs at its precision (rank >= 2, named *weight, not a
    // position table); every other tensor is held in fp32 whatever the precision.
    bool matrix = false;
};

// The bytes the weights take in one format.
struct WeightMemory {
    std::string format;  // "f32", "bf16", "f16", "int8", "int4-g128" (what @int4 holds)
    std::int64_t bytes = 0;
    std::string how;  // what is held, for `vitreg info`
    bool estimate = false;  // a format vitreg does not run yet (int4)
};

struct CheckpointSummary {
    std::string path;
    Config config;
    std::map<std::string, std::string> metadata;  // the file's own (safetensors __metadata__)
    std::vector<TensorShape> tensors;              // the model's (config.parameters counts them; a quantized file's scales aside)
    WeightQuantization quantization;               // a quantized file's (vitreg convert --dtype int8)
    std::int64_t missing_bytes = 0;                // tensor bytes past the end of a truncated file

    std::int64_t parameters() const;  // the sum over `tensors`
};

// Reads `path` (a file or folder, as Checkpoint takes) header-only: a truncated safetensors file
// is described, its missing bytes counted. Throws what Checkpoint's resolution throws.
CheckpointSummary summarize_checkpoint(const std::string& path, const ConfigOverrides& overrides = {});

// The weights' memory in f32, bf16, f16, int8 (+ per-column scales and sums) and, as an
// estimate, int4 group-128: the matrices in the format, every other tensor in fp32.
std::vector<WeightMemory> weight_memory(const std::vector<TensorShape>& tensors);

}  // namespace vitreg
