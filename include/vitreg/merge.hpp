#pragma once
// Joining the shards of a sharded extraction (vitreg extract --shard K/N) into the files a
// single-process run over the same inputs would have written.
#include <string>
#include <vector>

#include "vitreg/extract.hpp"

namespace vitreg {

struct MergeSummary {
    int shards = 0;
    ExtractSummary rows;
};

// Reads OUT_DIR/shard-K-of-N/ for K = 0..N-1 and writes OUT_DIR/manifest.jsonl (input order),
// cls.npy, pooled.npy, registers.npy or features.safetensors, patch/ and run.json,
// byte-identical to a single-process run. Throws UsageError listing every missing, unfinished
// or mismatched shard before anything is written.
MergeSummary merge_shards(const std::string& out_dir);

}  // namespace vitreg
