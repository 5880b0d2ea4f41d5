#pragma once
// Batch feature extraction: a list of image files in, CLS / pooled / register (and patch)
// features plus a manifest out. One bad file becomes a failed row; the batch goes on.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vitreg/batch_job.hpp"

namespace vitreg {

struct ExtractOptions : BatchOptions {
    bool patch_tokens = false;  // also write patch/<row>.{npy,safetensors} [h, w, D]
    bool project = false;       // also write embedding [E] = cls · proj (models with a projection: CLIP)
    // --layout shards (webdataset inputs only): per input shard NNNNN.{cls,pooled,registers,
    // embedding}.npy (or NNNNN.safetensors) and NNNNN.keys.jsonl instead of the whole-job arrays.
    bool shard_layout = false;

    // What extract's own options add to the job's identity (job.json) and to run.json, listed once.
    // `project` appears only when set, so jobs written before it existed still resume.
    nlohmann::ordered_json to_json() const;
};

// Writes into options.out_dir (or its shard folder; created if needed), every file atomically:
//   manifest.jsonl  one line per input, in input order: path, status ok|error, error, row,
//                   height, width, grid [h, w]
//   cls.npy [rows, D], pooled.npy [rows, D], registers.npy [rows, R, D] (R > 0),
//   embedding.npy [rows, E] with `project` (the unnormalized image embedding, CLIP's encode_image),
//   patch/<row>.npy [h, w, D] with patch_tokens; or features.safetensors (+ patch/<row>.safetensors)
//   run.json        the model, options and counts; written last, so its presence means done
//   job.json, chunks/  the durable progress (see BatchOptions)
// Without a class token (timm avg-pool models), cls.npy holds the pooled feature.
// With shard_layout, the arrays are per input shard (see ExtractOptions); manifest.jsonl and
// run.json as above; patch tokens also gathered per shard, NNNNN.patch.safetensors (one tensor
// per ok row, named by its row within the shard; the per-row patch/<row>.safetensors stay).
// Throws UsageError when OUT_DIR holds something it must not replace, for `project` on a model
// without a projection, or for shard_layout over inputs that are not shards.
BatchSummary extract_features(const Model& model, const std::vector<std::string>& inputs, const ExtractOptions& options,
                              const BatchProgress& progress = {});

}  // namespace vitreg
