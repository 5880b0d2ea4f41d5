// What `vitreg search` and `vitreg index` read that they did not write themselves: an index
// folder's sidecars (and the pixel options index.json states), a feature array's .npy header, a
// --layout shards folder's keys and a tar shard's member.
#include <algorithm>
#include <string>

#include "fuzz_files.hpp"
#include "search/index_files.hpp"
#include "search/npy_header.hpp"
#include "targets.hpp"
#include "vitreg/error.hpp"
#include "vitreg/search/index.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::fuzz {

void index_files(const std::uint8_t* data, std::size_t size) {
    try {
        (void)parse_npy_header(data, size, "cls.npy");
    } catch (const UsageError&) {
    }
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::size_t newline = std::min(text.find('\n'), text.size());
    try {
        // and the extract's pixel options it states, as search reads them back
        (void)extracted_pixels(check_index_info(text.substr(0, newline), "index.json"));
    } catch (const UsageError&) {
    }
    // The input as a tar shard, its first member read as the search page reads a thumbnail.
    const std::string shard = scratch() + "/shard.tar";
    put(shard, data, size);
    try {
        (void)read_tar_member(shard, 0, 1 << 20);
    } catch (const UsageError&) {
    }
    const std::string ids = scratch() + "/ids.jsonl";
    const std::string rest = newline < text.size() ? text.substr(newline + 1) : std::string();
    put(ids, reinterpret_cast<const std::uint8_t*>(rest.data()), rest.size());
    // The same lines as an extract --layout shards folder's keys, its array the whole input.
    const std::string shards = scratch() + "/shards";
    make_dirs(shards);
    put(shards + "/00000.keys.jsonl", reinterpret_cast<const std::uint8_t*>(rest.data()), rest.size());
    put(shards + "/00000.cls.npy", data, size);
    try {
        (void)read_feature_source(shards, "cls");
    } catch (const Error&) {  // a bad array is the mapped file's CheckpointError, naming it
    }
    try {
        const IdTable table(ids);
        for (std::int64_t id = 0; id < std::min<std::int64_t>(table.size(), 256); ++id) {
            try {
                (void)table.entry(id).to_json().dump();
            } catch (const UsageError&) {
            }
        }
    } catch (const UsageError&) {
    }
}

}  // namespace vitreg::fuzz
