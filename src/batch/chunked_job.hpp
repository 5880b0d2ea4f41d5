#pragma once
// The one loop behind every batch job (extract, dense): this shard's inputs in durable chunks,
// finished chunks read back, the others decoded, run and handed to the job image by image.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch_input.hpp"
#include "durable_job.hpp"
#include "feature_table.hpp"
#include "vitreg/batch_job.hpp"

namespace vitreg::batch {

// What a job does with the images of a chunk it runs.
struct ChunkWork {
    // The per-row tensors it saves with each chunk, which become its table (extract: cls, pooled, ...).
    std::vector<TableArray> tensors;
    // Folders it writes into, under the shard's folder (extract: "patch"), made once the job is open.
    std::vector<std::string> subdirs;
    // Before each batch's rows (dense fits a joint PCA here); may be empty.
    std::function<void(const std::vector<Prepared>&, const std::vector<Ran>&)> begin_batch;
    // Each good image, in input order: `row` already holds path, status, row (= row_number),
    // height, width and grid. Writes the image's own files, adds its fields to `row` and appends
    // its rows to chunk.tensors. `in_batch` is its position in the batch.
    std::function<void(ChunkData& chunk, nlohmann::ordered_json& row, std::size_t row_number, std::size_t in_batch,
                       const Prepared& prepared, const Ran& ran)>
        image;
    // How its batches run (dense's sliding window); empty: one forward per input size.
    BatchRunner runner;
};

// The keys that make two runs of a job the same: the job, the model's bytes, and every option
// that changes a written byte (not threads or batch for extract: results do not depend on them).
// A job adds its own options to these.
nlohmann::ordered_json job_identity(const std::string& job, const Model& model, const std::vector<std::string>& inputs,
                                    const BatchOptions& options);

struct ChunkedRun {
    std::string out_dir;        // the shard's folder
    std::vector<Chunk> chunks;  // all of them, finished, in order
};

// Runs the job `identity` over the share of `inputs` that options' shard takes, in durable
// chunks (see DurableJob): chunks already finished are read back, the others run with `probe`
// through `work` and saved. Per-image files are numbered by the shard's ok rows.
ChunkedRun run_chunked(const Model& model, const std::vector<std::string>& inputs, const BatchOptions& options,
                       nlohmann::ordered_json identity, const Probe& probe, const ChunkWork& work,
                       const BatchProgress& progress);

}  // namespace vitreg::batch
