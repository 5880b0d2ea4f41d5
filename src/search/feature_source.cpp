// An extract output folder as vectors to index: manifest.jsonl's ok rows and the chosen array,
// mapped (a .npy written by `vitreg extract`, or features.safetensors), never copied whole.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/json_limits.hpp"
#include "core/mapped_file.hpp"
#include "search/npy_header.hpp"
#include "vitreg/config.hpp"
#include "vitreg/error.hpp"
#include "vitreg/search/index.hpp"
#include "vitreg/tensor_file.hpp"
#include "vitreg/writers.hpp"
#include "io/file_digest.hpp"

namespace vitreg {

namespace {

std::string read_text(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(path + ": cannot read the " + what + " (is this a `vitreg extract` output folder?)");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The ok rows of a manifest (or of a shard's keys.jsonl), in feature-row order: their entries,
// appended to `entries`; "row" counts from 0 in each file.
void manifest_entries(const std::string& path, const std::string& text, std::vector<IndexEntry>& entries) {
    const std::size_t base = entries.size();
    std::istringstream lines(text);
    std::string line;
    for (std::size_t number = 1; std::getline(lines, line); ++number) {
        if (line.empty()) continue;
        const std::string where = path + ":" + std::to_string(number);
        nlohmann::json row;
        try {
            row = parse_json_bounded(line);
        } catch (const std::exception& e) {
            throw UsageError(where + ": not a manifest row: " + e.what());
        }
        if (!row.is_object()) throw UsageError(where + ": not a manifest row (an object)");
        const auto status = row.find("status");
        if (status != row.end() && !status->is_string()) throw UsageError(where + ": \"status\" is not text");
        if (status == row.end() || *status != "ok") continue;
        const auto r = row.find("row");
        const std::size_t want = entries.size() - base;
        if (r == row.end() || !r->is_number_unsigned() || r->get<std::uint64_t>() != want)
            throw UsageError(where + ": an ok row whose \"row\" is not " + std::to_string(want) +
                             " (the manifest's ok rows number the features in order)");
        entries.push_back(IndexEntry::from_json(row, where));
    }
}

struct MappedArray {
    std::shared_ptr<const void> keep;
    const float* data = nullptr;
    std::int64_t rows = 0, dim = 0;
    std::string path, header;
};

MappedArray map_npy(const std::string& path) {
    auto file = std::make_shared<MappedFile>(path, 10, [&](std::size_t) { return "not a .npy array (too short)"; });
    MappedArray a;
    const NpyHeader h = parse_npy_header(file->data(), file->size(), path);
    if (h.shape.size() != 2) throw UsageError(path + ": a feature array must be [rows, D], not " + std::to_string(h.shape.size()) + "-D");
    a.rows = h.shape[0];
    a.dim = h.shape[1];
    if (file->size() - h.data_offset != static_cast<std::uint64_t>(a.rows) * a.dim * 4)
        throw UsageError(path + ": holds " + std::to_string(file->size() - h.data_offset) + " data bytes, not the " +
                         std::to_string(a.rows) + " x " + std::to_string(a.dim) + " float32 its header states");
    a.data = reinterpret_cast<const float*>(file->data() + h.data_offset);
    a.header = std::string(reinterpret_cast<const char*>(file->data()), h.data_offset);
    a.keep = file;
    a.path = path;
    return a;
}

MappedArray map_safetensors(const std::string& path, const std::string& feature) {
    std::shared_ptr<TensorFile> file;
    try {
        file = open_tensor_file(path, ConfigOverrides{});
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
    if (!file->has(feature)) throw UsageError(path + ": has no \"" + feature + "\" array (extract it, or pick another --feature)");
    const TensorView& t = file->get(feature);
    if (t.dtype != DType::F32 || t.shape.size() != 2)
        throw UsageError(path + ": \"" + feature + "\" is " + to_string(t.dtype) + " " + t.shape_string() + ", not float32 [rows, D]");
    if (reinterpret_cast<std::uintptr_t>(t.data) % alignof(float) != 0) throw UsageError(path + ": \"" + feature + "\" is not 4-byte aligned");
    MappedArray a;
    a.data = reinterpret_cast<const float*>(t.data);
    a.rows = t.shape[0];
    a.dim = t.shape[1];
    a.header = t.shape_string();
    a.keep = file;
    a.path = path;
    return a;
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

// A manifest's (or keys.jsonl's) ok rows are the array's rows, one for one.
void check_row_count(const std::string& listing, std::size_t ok_rows, const MappedArray& a) {
    if (static_cast<std::int64_t>(ok_rows) != a.rows)
        throw UsageError(listing + ": lists " + std::to_string(ok_rows) + " ok rows, but " + a.path + " holds " +
                         std::to_string(a.rows));
}

// extract --layout shards: the stems "NNNNN." of the folder's NNNNN.keys.jsonl, in shard order.
std::vector<std::string> shard_stems(const std::string& dir) {
    std::vector<std::pair<unsigned long long, std::string>> found;
    static const std::regex keys(R"(([0-9]{5,18})\.keys\.jsonl)");
    std::smatch m;
    for (const std::string& name : list_dir(dir.empty() ? "." : dir))
        if (std::regex_match(name, m, keys)) found.push_back({std::stoull(m[1].str()), m[1].str() + "."});
    std::sort(found.begin(), found.end());  // by number, not by name
    std::vector<std::string> stems;
    for (auto& f : found) stems.push_back(std::move(f.second));
    return stems;
}

// The shards' ok rows and arrays (NNNNN.<feature>.npy or NNNNN.safetensors), joined in shard
// order into one array (copied: the shards' files are apart); `listed` gets what the digest covers.
MappedArray read_shards(const std::string& dir, const std::vector<std::string>& stems, const std::string& feature,
                        std::vector<IndexEntry>& entries, std::string& listed) {
    auto joined = std::make_shared<std::vector<float>>();
    MappedArray out;
    for (const auto& stem : stems) {
        const std::string keys_path = dir + stem + "keys.jsonl", npy = dir + stem + feature + ".npy";
        const std::string keys = read_text(keys_path, "shard's keys");
        const std::size_t before = entries.size();
        manifest_entries(keys_path, keys, entries);
        const MappedArray a = exists(npy) ? map_npy(npy) : map_safetensors(dir + stem + "safetensors", feature);
        check_row_count(keys_path, entries.size() - before, a);
        if (out.dim != 0 && a.dim != out.dim)
            throw UsageError(a.path + ": holds " + std::to_string(a.dim) + "-D features, " + out.path + " " +
                             std::to_string(out.dim) + "-D");
        if (out.dim == 0) out.path = a.path;
        out.dim = a.dim;
        joined->insert(joined->end(), a.data, a.data + a.rows * a.dim);
        listed += keys + "\n" + a.header + std::to_string(a.rows) + "\n";
    }
    out.rows = static_cast<std::int64_t>(entries.size());
    out.data = joined->data();
    out.keep = joined;
    return out;
}

}  // namespace

FeatureSource read_feature_source(const std::string& folder, const std::string& feature) {
    if (feature != "cls" && feature != "pooled" && feature != "embedding")
        throw UsageError("index: unknown --feature '" + feature + "' (cls, pooled or embedding)");
    const std::string dir = folder.empty() || folder.back() == '/' ? folder : folder + "/";
    const std::string manifest_path = dir + "manifest.jsonl", npy = dir + feature + ".npy",
                      safetensors = dir + "features.safetensors";
    FeatureSource s;
    MappedArray a;
    std::string listed;  // what the digest covers besides run.json
    const auto stems = exists(npy) || exists(safetensors) ? std::vector<std::string>{} : shard_stems(dir);
    if (!stems.empty()) {
        a = read_shards(dir, stems, feature, s.entries, listed);
    } else {
        const std::string manifest = read_text(manifest_path, "manifest");
        if (exists(npy)) a = map_npy(npy);
        else if (exists(safetensors)) a = map_safetensors(safetensors, feature);
        else throw UsageError(folder + ": has neither " + feature + ".npy nor features.safetensors (the --feature " + feature +
                              " array), nor NNNNN.keys.jsonl shards (extract --layout shards)");
        manifest_entries(manifest_path, manifest, s.entries);
        check_row_count(manifest_path, s.entries.size(), a);
        listed = manifest + "\n";
    }
    if (a.rows < 1 || a.dim < 1 || a.dim > (1 << 20)) throw UsageError(a.path + ": no vectors to index");
    s.data = a.data;
    s.rows = a.rows;
    s.dim = static_cast<int>(a.dim);
    s.keep = a.keep;
    s.folder = folder;
    s.feature = feature;
    std::string run_text;
    if (exists(dir + "run.json")) {
        run_text = read_text(dir + "run.json", "run.json");
        try {
            s.run = parse_json_bounded(run_text);
        } catch (const std::exception& e) {
            throw UsageError(dir + "run.json: malformed JSON: " + e.what());
        }
    }
    // files layout: manifest, run.json, the array's header and rows (as indexes built before shards)
    s.digest = text_digest(stems.empty() ? listed + run_text + "\n" + a.header + std::to_string(a.rows) : listed + run_text);
    return s;
}

}  // namespace vitreg
