#include "search/index_files.hpp"

#include <sys/stat.h>

#include <cstdio>

#include "core/json_limits.hpp"
#include "io/file_digest.hpp"
#include "search/faiss_util.hpp"
#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

constexpr const char* kFormat = "vitreg-index";
constexpr int kVersion = 1;

void make_folder(const std::string& out) {
    struct stat st {};
    if (::stat(out.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) throw UsageError(out + ": exists and is not a folder");
        return;
    }
    if (::mkdir(out.c_str(), 0777) != 0) throw IoError(out + ": cannot create the index folder");
}

const nlohmann::json& field(const nlohmann::json& info, const char* name, const std::string& path) {
    const auto it = info.find(name);
    if (it == info.end()) throw UsageError(path + ": not a vitreg index: no \"" + name + "\"");
    return *it;
}

}  // namespace

void write_index_folder(const std::string& out, const faiss::Index& index, const FeatureSource& s, const IndexReport& r,
                        const std::string& search_parameters, std::uint64_t seed) {
    make_folder(out);
    const std::string dir = out + "/";
    std::remove((dir + "index.json").c_str());  // until it is back, the folder is no index
    const std::uint64_t faiss_bytes = write_faiss_index(index, dir + "index.faiss");
    {
        AtomicFile ids(dir + "ids.jsonl");
        std::string buffer;
        for (const auto& e : s.entries) {
            buffer += e.to_json().dump() + "\n";
            if (buffer.size() > (4u << 20)) {
                ids.write(buffer);
                buffer.clear();
            }
        }
        ids.write(buffer);
        ids.commit();
    }
    nlohmann::ordered_json info{{"format", kFormat},
                                {"version", kVersion},
                                {"factory", r.factory},
                                {"metric", "cosine (inner product of L2-normalized rows)"},
                                {"dim", r.dim},
                                {"count", r.count},
                                {"feature", s.feature},
                                {"source", {{"folder", s.folder}, {"digest", s.digest}, {"run", s.run}}},
                                {"train_sample", r.train_sample},
                                {"recall_queries", r.recall_queries},
                                {"recall_at_10", r.recall_at_10},
                                {"seed", seed},
                                {"search_parameters", search_parameters},
                                {"faiss_bytes", faiss_bytes},
                                {"faiss_digest", file_digest(dir + "index.faiss")},
                                {"build_seconds", r.build_seconds}};
    write_file_atomic(dir + "index.json", info.dump(2) + "\n");
}

IdTable::IdTable(std::string path) : path_(std::move(path)) {
    try {
        file_ = MappedFile(path_, 1, [](std::size_t) { return "empty (an index has at least one id)"; });
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
    text_ = std::string_view(reinterpret_cast<const char*>(file_.data()), file_.size());
    std::size_t at = 0;
    while (at < text_.size()) {
        const std::size_t end = text_.find('\n', at);
        if (end == std::string_view::npos) throw UsageError(path_ + ": truncated (its last line has no newline)");
        starts_.push_back(at);
        at = end + 1;
    }
}

IndexEntry IdTable::entry(std::int64_t id) const {
    if (id < 0 || id >= size()) throw UsageError(path_ + ": no id " + std::to_string(id) + " (0.." + std::to_string(size() - 1) + ")");
    const std::size_t start = starts_[static_cast<std::size_t>(id)], end = text_.find('\n', start);
    const std::string where = path_ + ":" + std::to_string(id + 1);
    nlohmann::json row;
    try {
        row = parse_json_bounded(text_.substr(start, end - start));
    } catch (const std::exception& e) {
        throw UsageError(where + ": malformed JSON: " + e.what());
    }
    if (!row.is_object() || !row.contains("metadata")) throw UsageError(where + ": not an index entry");
    return IndexEntry::from_json(row, where);
}

nlohmann::json check_index_info(const std::string& text, const std::string& path) {
    nlohmann::json info;
    try {
        info = parse_json_bounded(text);
    } catch (const std::exception& e) {
        throw UsageError(path + ": not a vitreg index: malformed JSON: " + e.what());
    }
    if (!info.is_object() || info.value("format", nlohmann::json()) != kFormat)
        throw UsageError(path + ": not a vitreg index (format is not \"" + std::string(kFormat) + "\")");
    if (field(info, "version", path) != kVersion) throw UsageError(path + ": an index of another version (this vitreg reads 1)");
    const auto& dim = field(info, "dim", path);
    if (!dim.is_number_unsigned() || dim.get<std::uint64_t>() < 1 || dim.get<std::uint64_t>() > (1u << 20))
        throw UsageError(path + ": \"dim\" is not a whole number in 1..2^20");
    const auto& count = field(info, "count", path);
    if (!count.is_number_unsigned() || count.get<std::uint64_t>() < 1 || count.get<std::uint64_t>() > (1ull << 40))
        throw UsageError(path + ": \"count\" is not a whole number in 1..2^40");
    if (!field(info, "faiss_bytes", path).is_number_unsigned()) throw UsageError(path + ": \"faiss_bytes\" is not a whole number");
    for (const char* name : {"factory", "search_parameters", "faiss_digest"})
        if (!field(info, name, path).is_string()) throw UsageError(path + ": \"" + name + "\" is not a string");
    return info;
}

}  // namespace vitreg
