// An extract output folder as vectors to index: manifest.jsonl's ok rows and the chosen array,
// mapped (a .npy written by `vitreg extract`, or features.safetensors), never copied whole.
#include <sys/stat.h>

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

// The ok rows of a manifest, in feature-row order: their entries.
std::vector<IndexEntry> manifest_entries(const std::string& path, const std::string& text) {
    std::vector<IndexEntry> entries;
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
        if (row.value("status", std::string()) != "ok") continue;
        const auto r = row.find("row");
        if (r == row.end() || !r->is_number_unsigned() || r->get<std::uint64_t>() != entries.size())
            throw UsageError(where + ": an ok row whose \"row\" is not " + std::to_string(entries.size()) +
                             " (the manifest's ok rows number the features in order)");
        entries.push_back(IndexEntry::from_json(row, where));
    }
    return entries;
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

}  // namespace

FeatureSource read_feature_source(const std::string& folder, const std::string& feature) {
    if (feature != "cls" && feature != "pooled" && feature != "embedding")
        throw UsageError("index: unknown --feature '" + feature + "' (cls, pooled or embedding)");
    const std::string dir = folder.empty() || folder.back() == '/' ? folder : folder + "/";
    const std::string manifest_path = dir + "manifest.jsonl", npy = dir + feature + ".npy",
                      safetensors = dir + "features.safetensors";
    const std::string manifest = read_text(manifest_path, "manifest");
    MappedArray a;
    if (exists(npy)) a = map_npy(npy);
    else if (exists(safetensors)) a = map_safetensors(safetensors, feature);
    else throw UsageError(folder + ": has neither " + feature + ".npy nor features.safetensors (the --feature " + feature + " array)");
    FeatureSource s;
    s.entries = manifest_entries(manifest_path, manifest);
    if (static_cast<std::int64_t>(s.entries.size()) != a.rows)
        throw UsageError(manifest_path + ": lists " + std::to_string(s.entries.size()) + " ok rows, but " + a.path + " holds " +
                         std::to_string(a.rows));
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
    s.digest = text_digest(manifest + "\n" + run_text + "\n" + a.header + std::to_string(a.rows));
    return s;
}

}  // namespace vitreg
