#pragma once
// Rotary position embeddings (DESIGN.md §10): q and k of each patch token
// rotated pairwise by angles that depend on the patch's place in the grid; the
// prefix tokens (CLS, registers, test-time registers) are left as they are, so
// they carry no position.
#include <vector>

namespace vitreg {

// DINOv3's axial tables for a gh × gw grid: [patches, head_dim / 2] cos and sin
// of 2π·c·θ^(−4j/head_dim), with c the patch centre's y (first head_dim/4
// angles) or x (the rest) in [−1, 1], each axis over its own count.
struct RopeTables {
  int patches = 0, half = 0;
  std::vector<float> cos, sin;
};
RopeTables rope_axial_tables(int grid_h, int grid_w, int head_dim, float theta);

// Rotates q and k in place in a [batch, tokens, 3·dim] q|k|v block: for tokens
// from `first` on (patch p = token − first), every head's halves (a, b) of
// width half become (a·cos − b·sin, b·cos + a·sin), rotate_half's convention.
void apply_rope(float *qkv, int batch, int tokens, int first, int heads,
                int head_dim, const RopeTables &tables);

} // namespace vitreg
