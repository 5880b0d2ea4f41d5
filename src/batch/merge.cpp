#include "vitreg/merge.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "durable_job.hpp"
#include "feature_table.hpp"
#include "vitreg/error.hpp"
#include "core/parse_number.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

// "shard-K-of-N" → (K, N).
std::optional<std::pair<long, long>> shard_name(const std::string& name) {
    if (name.rfind("shard-", 0) != 0) return std::nullopt;
    const auto of = name.find("-of-");
    if (of == std::string::npos) return std::nullopt;
    const auto k = parse_integer(name.substr(6, of - 6), 0, 1 << 30);
    const auto n = parse_integer(name.substr(of + 4), 1, 1 << 30);
    if (!k || !n) return std::nullopt;
    return std::make_pair(*k, *n);
}

// The job a shard ran, without what differs between shards of one job.
nlohmann::ordered_json common_identity(nlohmann::ordered_json job) {
    // samples: webdataset shards' processes each index their own shard files
    for (const char* key : {"shard", "model", "vitreg_version", "samples", "samples_digest"}) job.erase(key);
    return job;
}

// Whether the job in `dir` read webdataset shards (its samples were counted per process).
bool job_of_shards(const std::string& dir) { return batch::read_json_file(dir + "/job.json").contains("samples_digest"); }

// Places `from` at `to` (a hard link when the file system allows, else a copy), atomically.
void place_file(const std::string& from, const std::string& to) {
    const std::string tmp = to + ".tmp." + std::to_string(::getpid());
    ::unlink(tmp.c_str());
    if (::link(from.c_str(), tmp.c_str()) != 0) {
        std::ifstream in(from, std::ios::binary);
        if (!in) throw IoError(from + ": cannot read: " + std::strerror(errno));
        std::stringstream ss;
        ss << in.rdbuf();
        write_file_atomic(to, ss.str());
        return;
    }
    if (::rename(tmp.c_str(), to.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::unlink(tmp.c_str());
        throw IoError(to + ": cannot rename into place: " + why);
    }
}

}  // namespace

MergeSummary merge_shards(const std::string& out_dir) {
    long count = 0;
    std::map<long, std::string> dirs;
    for (const auto& name : list_dir(out_dir)) {
        const auto s = shard_name(name);
        if (!s) continue;
        if (count && s->second != count)
            throw UsageError(out_dir + ": holds shards of different splits (" + std::to_string(count) + " and " +
                             std::to_string(s->second) + " shards); remove the stale ones");
        count = s->second;
        dirs[s->first] = out_dir + "/" + name;
    }
    if (!count) throw UsageError(out_dir + ": no shard folders (shard-K-of-N) to merge");

    // Every shard present, finished and of the same job; all problems listed at once.
    std::vector<std::string> problems;
    nlohmann::ordered_json identity, run;
    for (long k = 0; k < count; ++k) {
        const std::string name = "shard " + std::to_string(k) + " of " + std::to_string(count);
        const auto it = dirs.find(k);
        if (it == dirs.end() || !batch::exists(it->second + "/job.json")) {
            problems.push_back(name + ": missing");
            continue;
        }
        if (!batch::exists(it->second + "/run.json")) {
            problems.push_back(name + ": not finished (run it again with --resume)");
            continue;
        }
        const auto job = common_identity(batch::read_json_file(it->second + "/job.json"));
        if (identity.is_null()) {
            identity = job;
            run = batch::read_json_file(it->second + "/run.json");
        } else if (job != identity) {
            problems.push_back(name + ": ran another command, model, options or input list than shard 0 (" +
                               batch::identity_difference(identity, job) + ")");
        }
    }
    if (!problems.empty()) {
        std::string list;
        for (const auto& p : problems) list += "\n  " + p;
        throw UsageError(out_dir + ": cannot merge:" + list);
    }

    // All rows of all shards, back in the order of the (unsharded) input list.
    std::vector<batch::Chunk> chunks;
    std::vector<std::string> chunk_shard;
    for (const auto& [k, dir] : dirs)
        for (const auto& name : list_dir(dir + "/chunks"))
            if (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0) {
                chunks.push_back(batch::read_chunk(dir + "/chunks/" + name));
                chunk_shard.push_back(dir);
            }
    std::vector<batch::TableRow> rows = batch::rows_in_order(chunks);
    auto index_of = [](const batch::TableRow& r) { return r.chunk->input_index[r.at]; };
    std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return index_of(a) < index_of(b); });
    const std::uint64_t inputs = identity.value("inputs", std::uint64_t(0));
    // Files: each input's position once. Shards: each sample's (shard, place) once, every shard
    // file's process present (checked above), so none is missing.
    const bool of_shards = job_of_shards(dirs.begin()->second);
    bool complete = of_shards || rows.size() == inputs;
    for (std::size_t i = 0; complete && i < rows.size(); ++i)
        complete = of_shards ? (i == 0 || index_of(rows[i]) > index_of(rows[i - 1])) : index_of(rows[i]) == i;
    if (!complete)
        throw UsageError(out_dir + ": the shards hold " + std::to_string(rows.size()) + " rows, not each of the " +
                         (of_shards ? std::string("samples") : std::to_string(inputs) + " inputs") +
                         " exactly once; rerun the shards with --overwrite");

    // Per-image files ("patch/{row}.npy", "{row}.pca.png", ...) move to the merged row numbers.
    const FeatureFormat format = run.value("format", "npy") == "npy" ? FeatureFormat::Npy : FeatureFormat::Safetensors;
    std::vector<std::string> row_files;
    if (run.contains("row_files")) row_files = run["row_files"].get<std::vector<std::string>>();
    else if (run.value("patch_tokens", false)) row_files.push_back("patch/{row}" + file_extension(format));
    auto file_of = [](const std::string& pattern, std::size_t row) {
        const auto at = pattern.find("{row}");
        return pattern.substr(0, at) + std::to_string(row) + pattern.substr(at + 5);
    };
    for (const auto& pattern : row_files) {
        if (pattern.find("{row}") == std::string::npos || pattern.find("..") != std::string::npos || pattern[0] == '/')
            throw UsageError(out_dir + ": shard 0's run.json names a bad per-image file pattern '" + pattern + "'");
        if (const auto slash = pattern.rfind('/'); slash != std::string::npos) make_dirs(out_dir + "/" + pattern.substr(0, slash));
    }
    std::size_t global = 0;
    for (const auto& r : rows) {
        const auto& row = r.chunk->rows[r.at];
        if (row.value("status", "") != "ok") continue;
        const std::string& dir = chunk_shard[static_cast<std::size_t>(r.chunk - chunks.data())];
        const std::size_t was = row["row"].get<std::size_t>();
        for (const auto& pattern : row_files) place_file(dir + "/" + file_of(pattern, was), out_dir + "/" + file_of(pattern, global));
        ++global;
    }
    const bool dense = identity.value("job", "") == "vitreg dense";
    auto table = dense ? std::vector<batch::TableArray>{}
                       : batch::extract_table(run.value("dim", 0), run.value("registers", 0), run.value("embedding_dim", 0));
    if (run.value("output_layout", "") == "shards") {  // extract --layout shards: arrays per input shard
        batch::write_shard_tables(out_dir, rows, table, format, run.value("model", ""),
                                  run.value("patch_tokens", false) ? run.value("dim", 0) : 0);
        table.clear();
    }
    for (const char* key : {"inputs", "ok", "failed", "vitreg_version"}) run.erase(key);
    MergeSummary summary;
    summary.shards = static_cast<int>(count);
    summary.rows = batch::write_feature_table(out_dir, rows, table, format,
                                              run.value("model", ""), nlohmann::json(run));
    return summary;
}

}  // namespace vitreg
