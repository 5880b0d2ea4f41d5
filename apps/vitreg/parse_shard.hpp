#pragma once
// --shard K/N | auto: which share of the inputs this process takes (see ExtractOptions).
#include <string>

namespace vitreg::cli {

struct Shard {
    int index = 0;
    int count = 1;
};

// "K/N" (0 <= K < N), or "auto": with Slurm, SLURM_ARRAY_TASK_ID of `count` shards when `count`
// is given (so a lone resubmitted task knows N), else of SLURM_ARRAY_TASK_COUNT (the ID taken
// relative to SLURM_ARRAY_TASK_MIN, so --array=1-4 works too); without Slurm, JOB_COMPLETION_INDEX
// of `count` (a Kubernetes Indexed Job). Throws UsageError saying what is missing or wrong.
Shard parse_shard(const std::string& text, int count);

}  // namespace vitreg::cli
