#pragma once
// What the batch jobs (extract, dense) share: decode + preprocess a chunk of inputs in
// parallel, each to pixels or to the reason it failed; then run same-size images together.
#include <tbb/task_arena.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "input_source.hpp"
#include "vitreg/batch_job.hpp"
#include "vitreg/image.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::batch {

struct Prepared {
    std::optional<Pixels> pixels;
    Geometry geometry;
    std::string error;  // when pixels is empty
};

// Throws UsageError naming `name` when an input of this size may not run (over max_tokens), or
// when the job cannot use it (dense: its --pca-mask); `geometry` places it in its source image.
using InputCheck = std::function<void(int height, int width, const Geometry& geometry, const std::string& name)>;

// Inputs names[0..count), as read (`encoded`: their bytes, or nothing and the file is read by its
// name), decoded and preprocessed for `model` inside `arena`; inputs `check` refuses failed;
// never throws for a bad input.
std::vector<Prepared> prepare(const Model& model, const std::string* names, std::vector<Encoded>& encoded,
                              std::size_t count, const ResizeSpec& resize, const ImageLimits& limits,
                              const InputCheck& check, tbb::task_arena& arena);

// Reads inputs [start, start + count) of a stream_batches list, in order, one call at a time.
using InputReader = std::function<std::vector<Encoded>(std::size_t start, std::size_t count)>;

// The forward that holds input i: its features, trace and index in that forward's batch.
struct Ran {
    std::shared_ptr<const Features> features;
    std::shared_ptr<const Trace> trace;
    int index = 0;
};

// One forward per input size (rows keep their order within it); failed inputs get nothing.
std::vector<Ran> run_by_size(const Model& model, const std::vector<Prepared>& prepared, const Probe& probe,
                             const ForwardOptions& options);

// How a job runs a batch of prepared inputs: run_by_size unless it sees its images another way
// (dense's sliding window), with the input check that goes with it.
struct BatchRunner {
    InputCheck check;  // empty: Model::check_tokens against the forward's max_tokens
    std::function<std::vector<Ran>(const std::vector<Prepared>&, const ForwardOptions&)> run;  // empty: run_by_size
};

// What a batch job does with each batch, in input order: its first input's position in `paths`,
// each input's preparation and forward.
using BatchSink = std::function<void(std::size_t start, const std::vector<Prepared>&, const std::vector<Ran>&)>;

// names[0..count) as a pipeline (oneTBB parallel_pipeline) of batches of `batch` inputs: read
// (`read`, serial, in order: a shard is a stream) → decode and preprocess (parallel, up to two
// batches ahead) → forward → `sink` (one batch at a time, in order), so the next batch is read
// and decoded while this one runs.
void stream_batches(const Model& model, const std::string* names, std::size_t count, const InputReader& read,
                    std::size_t batch,
                    const ResizeSpec& resize, const ImageLimits& limits, const Probe& probe,
                    const ForwardOptions& options, tbb::task_arena& arena, const BatchSink& sink,
                    const BatchRunner& runner = {}, StageSeconds* stages = nullptr);

// One per-image array: PATH.npy, or PATH.safetensors holding `tensor` and `metadata`.
void write_array(const std::string& path_without_suffix, const std::string& tensor, const ArrayRef& array,
                 FeatureFormat format, const std::map<std::string, std::string>& metadata = {});

// The same file written a block of rows at a time, for arrays too large to hold twice:
// fill(first, count, out) writes rows [first, first + count), `row_floats` floats each, into out.
void write_array_rows(const std::string& path_without_suffix, const std::string& tensor,
                      const std::vector<std::int64_t>& shape, DType dtype, FeatureFormat format,
                      const std::map<std::string, std::string>& metadata, std::size_t row_floats,
                      const std::function<void(std::size_t first, std::size_t count, float* out)>& fill);

// Starts input i's manifest row; when it failed, records the reason, counts it and returns false.
bool start_row(nlohmann::ordered_json& row, const std::string& path, const Prepared& prepared, BatchSummary& summary);

// Writes OUT/manifest.jsonl (one row per input, in input order) and OUT/run.json (`run` plus
// the counts and vitreg's version), each atomically.
void finish(const std::string& out_dir, const std::vector<nlohmann::ordered_json>& manifest, nlohmann::json run,
            const BatchSummary& summary);

}  // namespace vitreg::batch
