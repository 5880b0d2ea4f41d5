#pragma once
// Joining the shards of a sharded batch job (vitreg extract or vitreg dense with --shard K/N)
// into the files a single-process run over the same inputs would have written.
#include <string>
#include <vector>

#include "vitreg/batch_job.hpp"

namespace vitreg {

struct MergeSummary {
    int shards = 0;
    BatchSummary rows;
};

// Reads OUT_DIR/shard-K-of-N/ for K = 0..N-1 and writes OUT_DIR/manifest.jsonl (input order),
// the job's per-image files renumbered (extract: patch/<row>; dense: <row>.npy, <row>.pca.png;
// hard links where the file system allows), extract's cls.npy, pooled.npy, registers.npy or
// features.safetensors, and run.json, byte-identical to a single-process run. Throws UsageError listing every missing, unfinished
// or mismatched shard before anything is written.
MergeSummary merge_shards(const std::string& out_dir);

}  // namespace vitreg
