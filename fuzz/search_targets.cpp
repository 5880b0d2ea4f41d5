// What `vitreg search` and `vitreg index` read that they did not write themselves: an index
// folder's sidecars, a feature array's .npy header and a tar shard's member.
#include <algorithm>
#include <string>

#include "fuzz_files.hpp"
#include "search/index_files.hpp"
#include "search/npy_header.hpp"
#include "targets.hpp"
#include "vitreg/error.hpp"

namespace vitreg::fuzz {

void index_files(const std::uint8_t* data, std::size_t size) {
    try {
        (void)parse_npy_header(data, size, "cls.npy");
    } catch (const UsageError&) {
    }
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::size_t newline = std::min(text.find('\n'), text.size());
    try {
        (void)check_index_info(text.substr(0, newline), "index.json");
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
