#pragma once
// The browser explorer behind `vitreg explore` (one self-contained page) and `vitreg serve`
// (the same page, fed live): any patch, layer and head, configurations side by side.
//
// The page's data, "vitreg-explore/1" (docs/explore.md): per image, per configuration, the token
// norms, key mass and abstention of every layer, the robust rule's artifact tokens, and the
// attention rows of the stored queries with their rollout rows. Arrays travel as "Q8": uint8
// with one float32 scale per last-axis row (value = byte · scale, scale = row max / 255),
// zlib-compressed, base64: the rows of ViT-S/14 at 224 px take about a byte per probability.
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "vitreg/render/explorer.hpp"
#include "vitreg/image.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg::render {

// Which queries a static page stores the rows of:
//   auto       every query when the page fits its budget, else every S-th patch (S as small as fits)
//   all        every token            cls    the class token (or the first register) only
//   stride:S   every S-th patch row and column, centred in the grid
//   R,C;R,C;.. these patches
// CLS and the registers are stored with any selection.
struct QuerySelection {
    enum class Kind { Auto, All, Cls, Stride, Patches };
    Kind kind = Kind::Auto;
    int stride = 1;
    std::vector<std::pair<int, int>> patches;

    static QuerySelection parse(const std::string& text);  // throws UsageError naming the bad part
    std::string to_string() const;
    // Token indices for this trace's shape (Auto reads as stride `auto_stride`, 1 = all).
    std::vector<int> tokens(const Trace& trace, int auto_stride = 1) const;
};

struct PageOptions {
    QuerySelection queries;
    bool rollout = true;                            // store rollout rows too
    std::size_t max_bytes = std::size_t(48) << 20;  // the page's budget (before compression)
    std::string title = "vitreg explore";
    std::int64_t max_tokens = kDefaultMaxTokens;  // per image and configuration (0 = no limit)
};

// One configuration of the page: its label and the loaded model (not owned).
struct PageConfig {
    std::string label;
    const Model* model = nullptr;
    ArtifactRule rule;  // which patches are outlined, ready for `model` (ArtifactRule::for_model)
};

// What the page's attention rows of `queries` queries and their rollout cost, before compression.
std::size_t stored_row_bytes(const Trace& trace, std::size_t queries, bool rollout);

// One configuration's entry. `queries` null: no rows stored (the live page asks for them).
nlohmann::json config_entry(const Exploration& e, const std::vector<int>* queries, bool rollout);
// One image's entry: its picture (the first configuration's input) and every configuration.
nlohmann::json image_entry(const std::string& name, const std::vector<const Exploration*>& views,
                           const std::vector<std::vector<int>>* queries, bool rollout);
// What the live page asks for on a click: every layer's and head's row of one query, and its
// rollout row when asked: {"rows": Q8 [layers, heads, 1, tokens], "rollout": Q8 [1, tokens] | null}.
nlohmann::json query_entry(const Exploration& e, int query, bool rollout);

// The page around `data` (a "vitreg-explore/1" object): HTML with the style sheet, the script
// and the data inline; nothing is fetched unless data["live"] is true.
std::string explore_page(const nlohmann::json& data);

// The whole static page: every image through every configuration (images decoded as `spec`
// and `limits` say), queries chosen within the budget. `note` hears what was chosen (stride,
// size). Throws UsageError when an explicit selection cannot fit, naming sizes and a way out.
std::string static_explore_page(const std::vector<PageConfig>& configs, const std::vector<std::string>& images,
                                const ResizeSpec& spec, const ImageLimits& limits, const PageOptions& options,
                                int threads, const std::function<void(const std::string&)>& note = {});

}  // namespace vitreg::render
