#include "core/checkpoint/name_table.hpp"

#include <optional>

#include "core/affix.hpp"
#include "core/parse_number.hpp"

namespace vitreg::source {

namespace {

std::optional<std::vector<std::string>> swap(const std::string& name, const NamePairs& pairs) {
    for (const auto& [from, to] : pairs) {
        if (from.back() == '.' ? !starts_with(name, from) : name != from) continue;
        std::vector<std::string> out;
        for (const auto& part : split(to, '|')) out.push_back(part + name.substr(from.size()));
        return out;
    }
    return std::nullopt;
}

}  // namespace

std::vector<std::string> stored_names(const std::string& canonical, const NameTable& table) {
    if (starts_with(canonical, "blocks.")) {
        const auto dot = canonical.find('.', 7);
        const std::string layer = table.block_prefix + canonical.substr(7, dot - 7) + ".";
        auto names = swap(canonical.substr(dot + 1), table.block).value_or(std::vector<std::string>{canonical.substr(dot + 1)});
        for (auto& n : names) n = layer + n;
        return names;
    }
    return swap(canonical, table.top).value_or(std::vector<std::string>{canonical});
}

}  // namespace vitreg::source
