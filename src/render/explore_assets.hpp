#pragma once
// The explorer page's script and style sheet (src/render/explore/), compiled in by
// cmake/embed_text.cmake.
namespace vitreg::render {
const char* explore_js();
const char* explore_css();
}  // namespace vitreg::render
