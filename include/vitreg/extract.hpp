#pragma once
// Batch feature extraction: a list of image files in, CLS / pooled / register (and patch)
// features plus a manifest out. One bad file becomes a failed row; the batch goes on.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "vitreg/image.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg {

enum class FeatureFormat { Npy, Safetensors };

struct ExtractOptions {
    std::string out_dir;
    ResizeSpec resize;
    bool patch_tokens = false;  // also write patch/<row>.{npy,safetensors} [h, w, D]
    FeatureFormat format = FeatureFormat::Npy;
    int batch = 8;    // images decoded and run together (same-size images share a forward)
    int threads = 0;  // 0 = all cores
    ImageLimits image_limits;
};

struct ExtractSummary {
    std::size_t inputs = 0;
    std::size_t ok = 0;
    std::size_t failed = 0;
};

// Called after each batch with (inputs done, inputs total).
using ExtractProgress = std::function<void(std::size_t, std::size_t)>;

// Writes into options.out_dir (created if needed), every file atomically:
//   manifest.jsonl  one line per input, in input order: path, status ok|error, error, row,
//                   height, width, grid [h, w]
//   cls.npy [rows, D], pooled.npy [rows, D], registers.npy [rows, R, D] (R > 0),
//   patch/<row>.npy [h, w, D] with patch_tokens; or features.safetensors (+ patch/<row>.safetensors)
//   run.json        the model and options that produced them
ExtractSummary extract_features(const Model& model, const std::vector<std::string>& inputs, const ExtractOptions& options,
                                const ExtractProgress& progress = {});

}  // namespace vitreg
