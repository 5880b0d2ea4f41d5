#pragma once
// The on-disk progress of a batch job, so that a run killed at any moment loses at most the
// chunk it was working on. OUT/job.json states what the job is (model digest, options, inputs);
// OUT/chunks/<k>.safetensors holds the finished chunk k of `chunk_rows` inputs: its features
// and, as metadata, its manifest rows and their input indices. Each file appears atomically,
// so a chunk file that exists is complete.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/safetensors.hpp"
#include "io/file_digest.hpp"

namespace vitreg::batch {

// True when `path` names anything (a dangling link too).
bool exists(const std::string& path);
// A job file (job.json, run.json); throws UsageError naming it when it is not JSON.
nlohmann::ordered_json read_json_file(const std::string& path);

// A chunk's per-row tensor: [ok rows, row_shape...] floats.
struct ChunkTensor {
    std::vector<std::int64_t> row_shape;
    std::vector<float> data;
};

// One finished chunk as written: rows in order, the job's tensors over its ok rows.
struct ChunkData {
    std::vector<nlohmann::ordered_json> rows;  // manifest rows ("row" counts the job's ok rows)
    std::vector<std::uint64_t> input_index;    // each row's position in the unsharded input list
    std::map<std::string, ChunkTensor> tensors;  // extract: cls, pooled (, registers); dense: none
    std::size_t ok = 0;
};

// A finished chunk read back: the mapped file and its rows.
struct Chunk {
    std::shared_ptr<const SafetensorsFile> file;  // the ChunkData's tensors
    std::vector<nlohmann::ordered_json> rows;
    std::vector<std::uint64_t> input_index;
    std::size_t ok = 0;
};

class DurableJob {
public:
    // Opens OUT_DIR for the job `identity` over `inputs` inputs:
    //  - empty or absent: starts it (writes job.json);
    //  - holding this job: continues it with `resume`, else refuses;
    //  - holding another job or other vitreg output: refuses, naming what differs, unless
    //    `overwrite`, which removes vitreg's files there (and only those) first.
    // Refusals are UsageErrors naming the folder.
    // While it lives, the job holds an exclusive lock on OUT_DIR/job.lock (a second process on
    // the same folder is refused; the kernel drops the lock when a process dies, even by SIGKILL),
    // so the temporaries a killed run left behind can be removed safely.
    DurableJob(std::string out_dir, nlohmann::ordered_json identity, std::size_t inputs, std::size_t chunk_rows,
               bool resume, bool overwrite);
    ~DurableJob();
    DurableJob(const DurableJob&) = delete;
    DurableJob& operator=(const DurableJob&) = delete;

    const std::string& out_dir() const { return out_dir_; }
    std::size_t chunk_count() const { return (inputs_ + chunk_rows_ - 1) / chunk_rows_; }
    std::size_t chunk_begin(std::size_t k) const { return k * chunk_rows_; }
    std::size_t chunk_end(std::size_t k) const { return std::min(inputs_, (k + 1) * chunk_rows_); }

    // Chunk k when it is finished and intact; nullopt when it must run (again).
    std::optional<Chunk> load(std::size_t k) const;
    void save(std::size_t k, const ChunkData& chunk) const;

    // The vitreg files in OUT_DIR besides job.json, chunks/ and per-image files (<row>.* in
    // OUT_DIR and OUT_DIR/patch).
    static const std::vector<std::string>& output_names();

private:
    std::string chunk_path(std::size_t k) const;
    void remove_outputs() const;
    void remove_temporaries() const;

    std::string out_dir_;
    std::size_t inputs_, chunk_rows_;
    int lock_fd_ = -1;
};

// The keys whose values differ between two job identities, as "key: old -> new, ..." ("" when
// none); "model" (a path) and "vitreg_version" are informative and not compared.
std::string identity_difference(const nlohmann::ordered_json& was, const nlohmann::ordered_json& now);

// Reads a finished chunk file; throws CheckpointError/IoError when it is not one.
Chunk read_chunk(const std::string& path);

}  // namespace vitreg::batch
