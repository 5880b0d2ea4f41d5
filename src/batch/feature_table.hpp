#pragma once
// The final files of an extraction, assembled from finished chunks: rows in the order given,
// "row" numbered over the ok rows, arrays streamed (never all in memory), each file atomic.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "durable_job.hpp"
#include "vitreg/extract.hpp"

namespace vitreg::batch {

struct TableRow {
    const Chunk* chunk = nullptr;
    std::size_t at = 0;  // the row's position in its chunk
};

// Rows of `chunks` in chunk order.
std::vector<TableRow> rows_in_order(const std::vector<Chunk>& chunks);

// Writes OUT/cls.npy, pooled.npy, registers.npy (R > 0) or OUT/features.safetensors, then
// OUT/manifest.jsonl, then OUT/run.json (`run` plus the counts): when run.json is there, the rest is.
// Returns the counts.
ExtractSummary write_feature_table(const std::string& out_dir, const std::vector<TableRow>& rows, int dim, int registers,
                                   FeatureFormat format, const std::string& model_path, nlohmann::json run);

}  // namespace vitreg::batch
