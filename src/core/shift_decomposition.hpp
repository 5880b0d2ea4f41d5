#pragma once
// DVT's split of shifted forwards into content and grid noise (docs/design.md, "Repairs and dense
// evaluation"), the computation behind @denoise=shift:K[:median].
#include <array>
#include <vector>

namespace vitreg {

// K forwards of one image shifted by whole patches: view k is its patch grid [grid_h*grid_w, dim]
// (row-major) for the image shifted by shifts[k] = (dy, dx), so that content cell c lands on grid
// position g = c + shifts[k]. The model is
//     view_k(g) = content(g - shifts[k]) + noise(g) + residual,
// the content moving with the image and the noise locked to the grid. An observation is a pair
// (k, g) whose content cell g - shifts[k] lies inside the grid (one that lies in the reflection
// padding shows a mirrored patch seen nowhere else, so it says nothing about the noise).
//
// Solved by alternating updates from noise = 0:
//     content(c) = sum over c's observations of w(g)·(view_k(g) - noise(g)) / sum of w(g),
//     noise(g)   = mean (with `median`: median) over g's observations of view_k(g) - content(g - s_k),
// the noise then shifted per channel so that its median over the grid is 0 (the gauge: the
// constant a content/noise split cannot tell apart goes to the content, and most positions carry
// none). w(g) = 1 / (1 + (|noise(g)| / m)²), m the median of |noise| over the grid, w at least kShiftMinWeight: a large
// locked vector varies with the content it meets, so an observation at a position of large
// noise is a less exact one (with the mean this is iteratively reweighted least squares; under
// the exact model any weights give the exact split). Until no noise value moves by more than
// kShiftTolerance times the views' largest magnitude, or kShiftMaxIterations rounds. The first
// content update (noise = 0) is the plain mean of the realigned views.
struct ShiftDecomposition {
    std::vector<float> content;  // [grid_h*grid_w, dim]: what @denoise writes
    std::vector<float> noise;    // [grid_h*grid_w, dim]: the grid term
    int iterations = 0;
    bool converged = false;
};

constexpr double kShiftTolerance = 1e-7;
constexpr int kShiftMaxIterations = 50;
constexpr double kShiftMinWeight = 1e-6;

ShiftDecomposition decompose_shifted(const std::vector<const float*>& views, const std::vector<std::array<int, 2>>& shifts,
                                     int grid_h, int grid_w, int dim, bool median);

}  // namespace vitreg
