#pragma once
// The report of `vitreg study` (docs/study.md): one self-contained HTML page, no script, the
// property table first (one row per property, one column per configuration, each cell a
// link to its figure), then the figures as inline SVG.
#include <nlohmann/json.hpp>
#include <string>

namespace vitreg::render {

// study: a parsed study.json ("format": "vitreg-study", "version": 1). Missing or null optional
// parts (retrofit, per-tensor int8, a second size, register eviction, the abstaining query)
// render as "—" or leave their figure out; nothing in the JSON is trusted as markup. The body
// carries data-figures="N", the number of <svg class="figure plot"> elements on the page.
std::string study_html(const nlohmann::json& study);

}  // namespace vitreg::render
