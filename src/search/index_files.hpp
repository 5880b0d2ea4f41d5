#pragma once
// The index folder's sidecar files: index.json (what was built, from what) and ids.jsonl (each
// id's image), written after index.faiss, index.json last; and their reader, fuzzed (target "index").
#include <faiss/Index.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

// Writes OUT/index.faiss, OUT/ids.jsonl and OUT/index.json (removed first, written last).
void write_index_folder(const std::string& out, const faiss::Index& index, const FeatureSource& source, const IndexReport& report,
                        const std::string& search_parameters, std::uint64_t seed);

// ids.jsonl, each line's place found without parsing it (10^7 lines cost 80 MB, not their JSON).
class IdTable {
public:
    explicit IdTable(std::string path);  // mapped; UsageError naming the file for a missing one or a last line without a newline
    std::int64_t size() const { return static_cast<std::int64_t>(starts_.size()); }
    IndexEntry entry(std::int64_t id) const;  // UsageError naming PATH:LINE for a malformed one

private:
    std::string path_;
    MappedFile file_;
    std::string_view text_;
    std::vector<std::uint64_t> starts_;
};

// index.json checked: format, version and the fields search reads (dim, count, factory,
// search_parameters, faiss_bytes). UsageError naming the file.
nlohmann::json check_index_info(const std::string& text, const std::string& path);

}  // namespace vitreg
