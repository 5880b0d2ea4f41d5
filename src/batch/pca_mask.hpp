#pragma once
// The foreground of `--pca foreground` from a mask (--pca-mask): found for an input, and resampled
// to the patch grid (docs/design.md, "Dense features at resolution").
#include <cstdint>
#include <string>
#include <vector>

#include "vitreg/dense.hpp"

namespace vitreg::batch {

// `input`'s mask on a grid_h × grid_w grid over the model input `geometry` describes: 1 where a
// cell is foreground, i.e. at least half of the model-input pixels that fall in it are. A mask of
// the source image's size goes through the image's resize and crop (nearest source pixel); one of
// the model input's size or of the grid's is taken as it is. Throws UsageError (or ImageError)
// naming the mask for one that is missing, unreadable, of another size, or with fewer than 3
// foreground cells.
std::vector<std::uint8_t> foreground_cells(const ForegroundMask& mask, const std::string& input, const Geometry& geometry,
                                           int grid_h, int grid_w);

}  // namespace vitreg::batch
