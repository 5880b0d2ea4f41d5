#pragma once
// The repairs' edits of the residual stream (vitreg/repair.hpp), applied by the forward after
// each block, before the Probe records it: what the Probe sees is what flows on.
#include <array>
#include <cstdint>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/repair.hpp"

namespace vitreg {

// One forward's residual stream x [batch, tokens, dim]: tokens = prefix, registers (trained, then
// test-time), patches (a grid_h x grid_w grid, row-major).
struct StreamShape {
    int batch = 0, tokens = 0, dim = 0;
    int first_register = 0, registers = 0;  // the trained registers only
    int first_patch = 0, grid_h = 0, grid_w = 0;
};

// A denoise's other shifted forwards: their stream after the last block, [shifts-1, batch,
// tokens, dim], shift k+1 of denoise_shifts(shifts) in block k.
struct ShiftedStreams {
    std::vector<std::array<int, 2>> shifts;  // all of them, (0,0) first
    std::vector<float> rows;
};

// The artifact rule over one image's patch tokens [count, dim]: 1 where a token is flagged.
// The norm rule (median + mad_k·MAD of the L2 norms, as outlines and --evict artifacts use).
std::vector<std::uint8_t> flag_artifact_patches(const float* patches, int count, int dim, float mad_k = 10.0f);
// The direction rule: median + mad_k·MAD of each token's |cos| with the layer's direction u [dim]
// (abs_cosine, as the forward's direction probe records it for the analysis rule).
std::vector<std::uint8_t> flag_direction_patches(const float* patches, int count, int dim, const float* u, float mad_k = 10.0f);

// Replaces each flagged token of one image's patch grid [grid_h*grid_w, dim] by the mean of the
// unflagged tokens within Chebyshev distance r of it, r = 1 (its 3x3 neighbours) and widened
// while there are none; the means are of the tokens before any replacement.
void inpaint_flagged(float* patches, int grid_h, int grid_w, int dim, const std::vector<std::uint8_t>& flagged);

// The images shifted by whole patches: for each shift (dy, dx) after the first, every image with
// out(y, x) = in(reflect(y - dy·patch), reflect(x - dx·patch)) (reflection without repeating the
// edge, as torch's "reflect" padding). [shifts-1, batch, 3, height, width]. Throws UsageError when
// a shift does not fit the input.
std::vector<float> shifted_pixels(const float* pixels, int batch, int height, int width, int patch,
                                  const std::vector<std::array<int, 2>>& shifts);

// Applies every repair that edits the stream after block `layer`, in order. `shifted` holds the
// other forwards of a denoise (the last block's); throws Error for a denoise without them.
void apply_repairs(const std::vector<Repair>& repairs, int layer, float* x, const StreamShape& shape,
                   const Config& config, const ShiftedStreams* shifted);

}  // namespace vitreg
