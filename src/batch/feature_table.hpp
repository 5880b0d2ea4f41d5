#pragma once
// The final files of a batch job, assembled from finished chunks: rows in the order given,
// "row" numbered over the ok rows, arrays streamed (never all in memory), each file atomic.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "durable_job.hpp"
#include "vitreg/batch_job.hpp"

namespace vitreg::batch {

struct TableRow {
    const Chunk* chunk = nullptr;
    std::size_t at = 0;  // the row's position in its chunk
};

// Rows of `chunks` in chunk order.
std::vector<TableRow> rows_in_order(const std::vector<Chunk>& chunks);

// One array of the table: [ok rows, row_shape...], taken from the chunks' tensor `name`.
struct TableArray {
    std::string name;
    std::vector<std::int64_t> row_shape;
};

// extract's table: cls [D], pooled [D], with registers registers [R, D], and with a projection
// (extract --project) embedding [E].
std::vector<TableArray> extract_table(int dim, int registers, int embedding_dim = 0);

// Writes OUT/<name>.npy for each of `arrays` or, when there are any, OUT/features.safetensors,
// then OUT/manifest.jsonl, then OUT/run.json (`run` plus the counts): when run.json is there,
// the rest is. Rows are renumbered over the ok rows (a row's "file", "<row>.<ext>", with it).
// Returns the counts.
BatchSummary write_feature_table(const std::string& out_dir, const std::vector<TableRow>& rows,
                                 const std::vector<TableArray>& arrays, FeatureFormat format,
                                 const std::string& model_path, nlohmann::json run);

// extract --layout shards: for each input shard (rows of one shard are consecutive; its position
// in the shard list is the high half of the rows' input_index), OUT/NNNNN.<name>.npy for each of
// `arrays` (or OUT/NNNNN.safetensors) and OUT/NNNNN.keys.jsonl, its rows' manifest lines, "row"
// numbered within the shard. NNNNN is the shard's position, zero-padded to 5 digits.
// With `patch_dim` (extract --patch-tokens), also OUT/NNNNN.patch.safetensors: the per-row files
// OUT/patch/<row>.safetensors (<row> counting the ok rows of `rows`) gathered, one float32 tensor
// [grid_h, grid_w, patch_dim] per ok row named by its row within the shard, the rows' keys as the
// JSON array "keys" in the metadata.
void write_shard_tables(const std::string& out_dir, const std::vector<TableRow>& rows,
                        const std::vector<TableArray>& arrays, FeatureFormat format, const std::string& model_path,
                        int patch_dim = 0);

}  // namespace vitreg::batch
