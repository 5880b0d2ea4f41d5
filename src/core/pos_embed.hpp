#pragma once
// Position-embedding resampling from the stored M×M grid to an h×w grid, matching each
// checkpoint origin's PyTorch call exactly (docs/design.md, "Reference semantics").
#include <vector>

#include "vitreg/config.hpp"

namespace vitreg {

// `grid` is [M*M, D] row-major (row r, column c at r*M + c); returns [h*w, D]. Returns the
// input unchanged when h == w == M (every origin skips the call then).
std::vector<float> resample_pos_embed(const std::vector<float>& grid, int M, int D, int h, int w, PosInterp mode);

}  // namespace vitreg
