#include "durable_job.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "vitreg/error.hpp"
#include "vitreg/version.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::batch {

namespace {

void remove_file(const std::string& p) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) throw IoError(p + ": cannot remove: " + std::strerror(errno));
}

// "12.npy", "12.safetensors", "12.pca.png", extract --layout shards' "00012.cls.npy" and
// "00012.keys.jsonl", or a temporary left by a killed writer.
bool is_vitreg_row_file(const std::string& n) {
    const auto dot = n.find('.');
    if (dot == 0 || dot == std::string::npos || n.find_first_not_of("0123456789") != dot) return false;
    std::string rest = n.substr(dot);
    if (const auto tmp = rest.find(".tmp."); tmp != std::string::npos) rest.resize(tmp);
    const bool array = rest.size() >= 4 && rest.compare(rest.size() - 4, 4, ".npy") == 0 &&
                       (rest.size() == 4 || rest.find('.', 1) == rest.size() - 4);  // .npy or .NAME.npy
    return array || rest == ".safetensors" || rest == ".pca.png" || rest == ".keys.jsonl" ||
           rest == ".patch.safetensors";
}

}  // namespace

std::string identity_difference(const nlohmann::ordered_json& was, const nlohmann::ordered_json& now) {
    std::string out;
    for (const auto& [key, value] : now.items()) {
        if (key == "model" || key == "vitreg_version") continue;
        const auto old = was.contains(key) ? was[key] : nlohmann::ordered_json();
        if (old != value) out += (out.empty() ? "" : ", ") + key + ": " + old.dump() + " -> " + value.dump();
    }
    return out;
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

nlohmann::ordered_json read_json_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
        return nlohmann::ordered_json::parse(ss.str());
    } catch (const std::exception& e) {
        throw UsageError(path + ": unreadable (" + e.what() + "); use --overwrite to start over");
    }
}

const std::vector<std::string>& DurableJob::output_names() {
    static const std::vector<std::string> names{"manifest.jsonl", "run.json",      "cls.npy",
                                                "pooled.npy",     "registers.npy", "features.safetensors"};
    return names;
}

DurableJob::DurableJob(std::string out_dir, nlohmann::ordered_json identity, std::size_t inputs, std::size_t chunk_rows,
                       bool resume, bool overwrite)
    : out_dir_(std::move(out_dir)), inputs_(inputs), chunk_rows_(std::max<std::size_t>(1, chunk_rows)) {
    identity["chunk_rows"] = chunk_rows_;
    identity["vitreg_version"] = VITREG_VERSION;
    const std::string job_file = out_dir_ + "/job.json";
    bool start = true;
    if (exists(job_file)) {
        const auto was = read_json_file(job_file);
        const std::string diff = identity_difference(was, identity);
        if (diff.empty() && resume) {
            start = false;
        } else if (!overwrite) {
            if (!diff.empty())
                throw UsageError(out_dir_ + ": holds a run of another command, model, options or inputs (" + diff +
                                 "); use another folder, or --overwrite to replace it");
            throw UsageError(out_dir_ + ": holds this run already; use --resume to continue (or finish) it, "
                                        "or --overwrite to start over");
        }
    } else {
        bool has_outputs = false;
        for (const auto& n : output_names()) has_outputs |= exists(out_dir_ + "/" + n);
        if (has_outputs && !overwrite)
            throw UsageError(out_dir_ + ": holds vitreg output without a job description; use another folder, or "
                                        "--overwrite to replace it");
    }
    make_dirs(out_dir_);
    const std::string lock = out_dir_ + "/job.lock";
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0) throw IoError(lock + ": cannot create: " + std::strerror(errno));
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(lock_fd_);
        throw UsageError(out_dir_ + ": another vitreg process is writing there");
    }
    remove_temporaries();
    if (start) {
        remove_outputs();
        make_dirs(out_dir_ + "/chunks");
        write_file_atomic(job_file, identity.dump(2) + "\n");
    }
}

DurableJob::~DurableJob() {
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

void DurableJob::remove_temporaries() const {
    for (const std::string& dir : {out_dir_, out_dir_ + "/chunks", out_dir_ + "/patch"})
        for (const auto& n : list_dir(dir))
            if (n.find(".tmp.") != std::string::npos) remove_file(dir + "/" + n);
}

void DurableJob::remove_outputs() const {
    remove_file(out_dir_ + "/job.json");
    for (const auto& n : list_dir(out_dir_ + "/chunks")) remove_file(out_dir_ + "/chunks/" + n);
    for (const auto& n : output_names()) remove_file(out_dir_ + "/" + n);
    for (const std::string& dir : {out_dir_, out_dir_ + "/patch"})
        for (const auto& n : list_dir(dir))
            if (is_vitreg_row_file(n)) remove_file(dir + "/" + n);
}

std::string DurableJob::chunk_path(std::size_t k) const {
    char name[32];
    std::snprintf(name, sizeof name, "%08zu.safetensors", k);
    return out_dir_ + "/chunks/" + name;
}

Chunk read_chunk(const std::string& path) {
    Chunk c;
    c.file = std::make_shared<const SafetensorsFile>(path);
    const auto& meta = c.file->metadata();
    const auto rows = meta.find("manifest"), index = meta.find("inputs");
    if (rows == meta.end() || index == meta.end()) throw IoError(path + ": not a vitreg chunk (no manifest)");
    try {
        std::istringstream lines(rows->second);
        std::string line;
        while (std::getline(lines, line)) c.rows.push_back(nlohmann::ordered_json::parse(line));
        c.input_index = nlohmann::json::parse(index->second).get<std::vector<std::uint64_t>>();
    } catch (const std::exception& e) {
        throw IoError(path + ": corrupt chunk manifest: " + e.what());
    }
    if (c.input_index.size() != c.rows.size()) throw IoError(path + ": chunk manifest and input indices disagree");
    for (const auto& r : c.rows) c.ok += r.value("status", "") == "ok";
    for (const auto& name : c.file->names())
        if (c.file->get(name).shape.at(0) != static_cast<std::int64_t>(c.ok))
            throw IoError(path + ": chunk holds a different number of rows than its manifest");
    return c;
}

std::optional<Chunk> DurableJob::load(std::size_t k) const {
    const std::string path = chunk_path(k);
    if (!exists(path)) return std::nullopt;
    try {
        Chunk c = read_chunk(path);
        if (c.rows.size() != chunk_end(k) - chunk_begin(k)) return std::nullopt;
        return c;
    } catch (const Error&) {
        return std::nullopt;  // damaged (not by vitreg, whose writes are atomic): run it again
    }
}

void DurableJob::save(std::size_t k, const ChunkData& chunk) const {
    const auto ok = static_cast<std::int64_t>(chunk.ok);
    std::map<std::string, ArrayRef> tensors;
    for (const auto& [name, t] : chunk.tensors) {
        std::vector<std::int64_t> shape{ok};
        shape.insert(shape.end(), t.row_shape.begin(), t.row_shape.end());
        tensors.emplace(name, ArrayRef{shape, t.data.data()});
    }
    std::string lines;
    for (const auto& r : chunk.rows)  // shards' keys and captions may be any bytes
        lines += r.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    write_safetensors(chunk_path(k), tensors,
                      {{"manifest", lines}, {"inputs", nlohmann::json(chunk.input_index).dump()}});
}

}  // namespace vitreg::batch
