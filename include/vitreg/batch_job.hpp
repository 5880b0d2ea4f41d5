#pragma once
// What every batch job (vitreg extract, vitreg dense) shares: how it reads and runs its inputs,
// and how it survives being killed (durable chunks, --resume) or split over machines (shards).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vitreg/image.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg {

enum class FeatureFormat { Npy, Safetensors };

// Seconds a batch job's pipeline stages have been busy so far: reading its inputs (a shard's
// stream; nothing for files, which decode reads), decoding and preprocessing, and the forward
// with what the job writes per image. Stages overlap, so the sum exceeds the wall time.
struct StageSeconds {
    double read = 0, decode = 0, forward = 0;
};
using StageProgress = std::function<void(const StageSeconds&)>;

struct BatchOptions {
    std::string out_dir;
    ResizeSpec resize;
    FeatureFormat format = FeatureFormat::Npy;
    int batch = 8;    // images decoded and run together (same-size images share a forward)
    int threads = 0;  // 0 = all cores
    ImageLimits image_limits;
    std::int64_t max_tokens = kDefaultMaxTokens;  // per image; 0 = no limit
    // Durability: progress is saved every `chunk_rows` inputs (OUT/chunks/); an OUT_DIR that
    // holds this job is continued with `resume`; one holding anything else is refused unless
    // `overwrite` (which replaces vitreg's files there).
    std::size_t chunk_rows = 256;
    bool resume = false;
    bool overwrite = false;
    // This process's share of the inputs: block `index` (0-based) of `count` blocks of the
    // sorted input list, written to OUT/shard-<index>-of-<count>/ (count 1 = everything, in OUT).
    int shard_index = 0;
    int shard_count = 1;
    // Called before each progress call with the stages' busy seconds so far (--progress shows
    // their shares); may be empty.
    StageProgress stage_progress;
};

struct BatchSummary {
    std::size_t inputs = 0;
    std::size_t ok = 0;
    std::size_t failed = 0;
};

// Called after each batch with (inputs done, inputs total).
using BatchProgress = std::function<void(std::size_t, std::size_t)>;

// The share of the inputs a process takes: block `index` (0-based) of `count`.
struct Shard {
    int index = 0;
    int count = 1;
};

// "K/N" (0 <= K < N), or "auto": with Slurm, SLURM_ARRAY_TASK_ID of `count` shards when `count`
// is given (so a lone resubmitted task knows N), else of SLURM_ARRAY_TASK_COUNT (the ID taken
// relative to SLURM_ARRAY_TASK_MIN, so --array=1-4 works too); without Slurm, JOB_COMPLETION_INDEX
// of `count` (a Kubernetes Indexed Job). Throws UsageError saying what is missing or wrong.
Shard parse_shard(const std::string& text, int count = 0);

// The inputs a shard takes: positions into `inputs` of block `index` of `count` equal blocks
// of the inputs sorted by path (so a file's shard does not depend on how the list was ordered).
std::vector<std::size_t> shard_positions(const std::vector<std::string>& inputs, int index, int count);

// OUT_DIR/shard-<index>-of-<count> (OUT_DIR itself for count 1).
std::string shard_dir(const std::string& out_dir, int index, int count);

// "npy" | "safetensors", and the per-image file suffix ".npy" | ".safetensors".
std::string to_string(FeatureFormat format);
std::string file_extension(FeatureFormat format);

}  // namespace vitreg
