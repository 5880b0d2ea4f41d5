#pragma once
// Fusing heads and attention rollout (Abnar & Zuidema, docs/design.md, "Artifact metrics").
#include <string>
#include <vector>

#include "vitreg/probe.hpp"

namespace vitreg {

enum class HeadFusion { Mean, Max, Min };
HeadFusion parse_head_fusion(const std::string& s);  // "mean" | "max" | "min"
std::string to_string(HeadFusion f);

// Element-wise fusion of `heads` rows of length n laid out one after another.
std::vector<float> fuse_heads(const float* rows, int heads, int n, HeadFusion fusion);

// Rollout over all layers of image b. Needs every query row of every layer in the trace
// (Probe::all_queries). Per layer: fuse heads → F; zero the floor(discard·N²) smallest entries
// of F except F[0,0]; Â = F + I with each row renormalized to sum 1; result = Â_{L-1}⋯Â_0.
// Returns [N, N] row-major.
std::vector<double> rollout(const Trace& trace, int b, HeadFusion fusion, float discard = 0.0f);
// The same on explicit per-layer fused matrices [layers][N*N] (for tests and other callers).
std::vector<double> rollout(const std::vector<std::vector<float>>& fused, int n, float discard);
// Rows `queries` of the same rollout (discard 0), e_q·Â_{L-1}⋯Â_0, without forming the N×N
// product: [queries, N] row-major, in float (what a viewer shows).
std::vector<float> rollout_rows(const std::vector<std::vector<float>>& fused, int n, const std::vector<int>& queries);

}  // namespace vitreg
