#include "core/checkpoint/metadata.hpp"

#include "vitreg/error.hpp"
#include "core/parse_number.hpp"

namespace vitreg::source {

std::optional<std::string> Metadata::str(const std::string& key) const {
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::optional<long> Metadata::count(const std::string& key) const {
    auto s = str(key);
    if (!s) return std::nullopt;
    const auto v = parse_integer(*s, 0, 1 << 24);
    if (!v) throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not a valid count");
    return *v;
}

namespace {

// One key read by the shared parser (config.cpp's apply_config_metadata), onto a default Config.
Config with_stated(const Metadata& meta, const std::string& key) {
    Config c;
    apply_config_metadata({{key, *meta.str(key)}}, c, meta.file());
    return c;
}

}  // namespace

std::optional<Family> stated_family(const Metadata& meta) {
    if (!meta.str("family")) return std::nullopt;
    return with_stated(meta, "family").family;
}

std::optional<Positions> stated_positions(const Metadata& meta) {
    if (!meta.str("positions")) return std::nullopt;
    return with_stated(meta, "positions").positions;
}

void apply_metadata(const Metadata& meta, Config& c) {
    // What vitreg convert writes, read by the parser that writes it (config_metadata's keys). The
    // patch size and register count are checked against the tensors instead (resolve's checks), and
    // the rotary keys mean nothing to a model whose positions do not rotate.
    std::map<std::string, std::string> stated = meta.values();
    stated.erase("patch_size");
    stated.erase("num_registers");
    stated.erase("family");     // (read first: stated_family, stated_positions)
    stated.erase("positions");
    if (c.positions != Positions::RopeEva) stated.erase("rope_ref_grid");
    if (!c.rotary()) stated.erase("rope_theta");
    apply_config_metadata(stated, c, meta.file());
}

}  // namespace vitreg::source
