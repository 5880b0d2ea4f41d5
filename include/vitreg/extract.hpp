#pragma once
// Batch feature extraction: a list of image files in, CLS / pooled / register (and patch)
// features plus a manifest out. One bad file becomes a failed row; the batch goes on.
#include <string>
#include <vector>

#include "vitreg/batch_job.hpp"

namespace vitreg {

struct ExtractOptions : BatchOptions {
    bool patch_tokens = false;  // also write patch/<row>.{npy,safetensors} [h, w, D]
};

// Writes into options.out_dir (or its shard folder; created if needed), every file atomically:
//   manifest.jsonl  one line per input, in input order: path, status ok|error, error, row,
//                   height, width, grid [h, w]
//   cls.npy [rows, D], pooled.npy [rows, D], registers.npy [rows, R, D] (R > 0),
//   patch/<row>.npy [h, w, D] with patch_tokens; or features.safetensors (+ patch/<row>.safetensors)
//   run.json        the model, options and counts; written last, so its presence means done
//   job.json, chunks/  the durable progress (see BatchOptions)
// Throws UsageError when OUT_DIR holds something it must not replace.
BatchSummary extract_features(const Model& model, const std::vector<std::string>& inputs, const ExtractOptions& options,
                              const BatchProgress& progress = {});

}  // namespace vitreg
