#pragma once
// A source's tensor names: canonical (dinov2) names on the left, the stored ones on the right.
#include <string>
#include <utility>
#include <vector>

namespace vitreg::source {

using NamePairs = std::vector<std::pair<std::string, std::string>>;

// One translation table per level: `blocks.i.` maps to `block_prefix` + i + ".". An entry matches
// its name exactly, or as a prefix when it ends in '.'. A target "a.|b.|c." names parts stored
// apart and joined along dim 0 (HF's q, k and v). Unknown names pass through unchanged (and then
// are missing).
struct NameTable {
    NamePairs top;
    std::string block_prefix = "blocks.";
    NamePairs block;
    bool proj_transposed = false;  // the canonical `proj` [D, E] is stored [E, D] (HF's visual_projection, timm's head)
};

// The stored name(s) of `canonical` (without the file's prefix).
std::vector<std::string> stored_names(const std::string& canonical, const NameTable& table);

}  // namespace vitreg::source
