// An indexed image as ids.jsonl stores it, and as a manifest row of `vitreg extract` names it.
#include "vitreg/error.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

namespace {

std::string text_field(const nlohmann::json& row, const char* name, const std::string& where) {
    const auto it = row.find(name);
    if (it == row.end() || it->is_null()) return {};
    if (!it->is_string()) throw UsageError(where + ": \"" + name + "\" is not a string");
    return it->get<std::string>();
}

}  // namespace

nlohmann::json IndexEntry::to_json() const {
    nlohmann::json j{{"key", key}};
    if (!path.empty()) j["path"] = path;
    if (!shard.empty()) {
        j["shard"] = shard;
        j["offset"] = offset;
    }
    j["metadata"] = metadata.is_null() ? nlohmann::json::object() : metadata;
    return j;
}

// ids.jsonl's rows carry "metadata" (a shard member's manifest row too, with its caption added);
// another manifest row's metadata is the row less what the index
// keeps apart (key, path, shard, offset) and what only the extract needs (status, error, row).
IndexEntry IndexEntry::from_json(const nlohmann::json& row, const std::string& where) {
    if (!row.is_object()) throw UsageError(where + ": not an object");
    IndexEntry e;
    e.path = text_field(row, "path", where);
    e.key = text_field(row, "key", where);
    if (e.key.empty()) e.key = e.path;
    if (e.key.empty()) throw UsageError(where + ": has neither \"key\" nor \"path\"");
    e.shard = text_field(row, "shard", where);
    if (e.shard.empty() && !e.path.empty() && row.contains("key") && row.contains("offset")) {
        e.shard = e.path;  // extract's row of a shard member: "path" names the shard
        e.path.clear();
    }
    if (!e.shard.empty()) {
        const auto offset = row.find("offset");
        // Parsed text gives an unsigned number, an entry's own to_json() a signed one.
        const bool whole = offset != row.end() && (offset->is_number_unsigned() ? offset->get<std::uint64_t>() <= (1ull << 62)
                                                   : offset->is_number_integer() && offset->get<std::int64_t>() >= 0);
        if (!whole) throw UsageError(where + ": a shard member without a whole \"offset\"");
        e.offset = offset->get<std::int64_t>();
    }
    const auto meta = row.find("metadata");
    if (meta != row.end()) {
        if (!meta->is_object()) throw UsageError(where + ": \"metadata\" is not an object");
        e.metadata = *meta;
        // A shard member's caption (KEY.txt) sits beside its KEY.json in the manifest row.
        const auto caption = row.find("caption");
        if (caption != row.end() && caption->is_string() && !e.metadata.contains("caption")) e.metadata["caption"] = *caption;
    } else {
        for (const auto& [name, value] : row.items())
            if (name != "key" && name != "path" && name != "shard" && name != "offset" && name != "status" && name != "error" &&
                name != "row")
                e.metadata[name] = value;
    }
    return e;
}

}  // namespace vitreg
