#pragma once
// Rotary position embeddings (docs/design.md, "Families"): q and k of each patch token
// rotated pairwise by angles that depend on the patch's place in the grid; the
// prefix tokens (CLS, registers, test-time registers) are left as they are, so
// they carry no position.
#include <vector>

namespace vitreg {

// Per patch, head_dim / 2 angles as cos and sin: the first head_dim/4 from
// the patch's y, the rest from its x (the same bands on each axis). Which two
// of a head's entries an angle turns: halves (j, j + head_dim/2, rotate_half:
// DINOv3) or neighbours (2j, 2j + 1, interleaved: EVA-02).
struct RopeTables {
  int patches = 0, half = 0;
  bool interleaved = false;
  std::vector<float> cos, sin;
};
// DINOv3's axial tables for a gh × gw grid: angles 2π·c·θ^(−4j/head_dim), with
// c the patch centre in [−1, 1], each axis over its own count.
RopeTables rope_axial_tables(int grid_h, int grid_w, int head_dim, float theta);
// EVA-02's (timm RotaryEmbeddingCat, in_pixels=False with ref_feat_shape):
// angles t·θ^(−4j/head_dim), t = i / n · ref per axis (i the row or column).
RopeTables rope_eva_tables(int grid_h, int grid_w, int head_dim, float theta,
                           int ref_h, int ref_w);

// Rotates q and k in place in a [batch, tokens, 3·dim] q|k|v block: for tokens
// from `first` on (patch p = token − first), every head's pairs (a, b) become
// (a·cos − b·sin, b·cos + a·sin).
void apply_rope(float *qkv, int batch, int tokens, int first, int heads,
                int head_dim, const RopeTables &tables);

} // namespace vitreg
