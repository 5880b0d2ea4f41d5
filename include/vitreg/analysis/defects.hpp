#pragma once
// Defect directions from the weights alone (SINDER, Wang et al. 2024; docs/design.md, "Artifact
// metrics"). Each block is linearized around its residual stream:
//   LayerNorm  -> C·diag(w), C = I − (1/D)·11ᵀ (the 1/σ scale dropped),
//   attention  -> A = I + diag(γ₁)·W_o·W_v·diag(w₁)·C (the value path; EVA-CLIP's sub-LayerNorm
//                 on the merged heads enters as its own C·diag(w) between W_o and W_v),
//   MLP        -> M = I + diag(γ₂)·W₂·B·diag(w₂)·C, B the least-squares linear map (no intercept)
//                 from x to act(W₁x + b₁) (the fc2 input: after EVA's sub-LayerNorm, SwiGLU's
//                 silu(gate)·value) over a seeded Gaussian sample x ~ N(0, I),
// E_i = M_i·A_i, G_i = E_i ⋯ E_0. Layer i's defect direction u_i is the leading left singular
// vector of G_i (sign: its largest-magnitude component positive); the top singular values are
// reported beside it. Everything runs in float64.
//
// The sample: value j of the [samples, dim] matrix (row-major) is the Box–Muller normal of the
// pair j/2 (cos for even j, sin for odd), whose uniforms are SplitMix64 outputs number 2p+1 and
// 2p+2 of `seed` mapped to ((z >> 11) + 0.5)·2⁻⁵³. One sample serves every layer. The PyTorch
// reference (tests/reference) draws the same numbers from this definition.
#include <cstdint>
#include <string>
#include <vector>

#include "vitreg/checkpoint.hpp"
#include "vitreg/model.hpp"

namespace vitreg {

struct DefectOptions {
    int samples = 16384;     // rows of the Gaussian sample the MLP fit uses
    std::uint64_t seed = 0;  // of that sample
    int top = 8;             // singular values kept per layer (at most the width)
};

struct DefectDirections {
    int layers = 0, dim = 0, top = 0;
    std::vector<float> directions;       // [layers, dim] u_i, unit length
    std::vector<float> singular_values;  // [layers, top] of G_i, descending
    int samples = 0;
    std::uint64_t seed = 0;
    std::string model;  // the checkpoint they were computed from

    const float* direction(int layer) const { return directions.data() + static_cast<std::size_t>(layer) * dim; }
    float singular_value(int layer, int k) const { return singular_values[static_cast<std::size_t>(layer) * top + k]; }
    // "N-sample least-squares fit, seed S" for outputs and messages.
    std::string fit_description() const;
};

// The n×dim Gaussian sample described above (row-major, float64).
std::vector<double> defect_sample(int samples, int dim, std::uint64_t seed);

// Every MLP kind (gelu, quick_gelu, gelu_tanh, swiglu). Throws UsageError on samples < 1 or
// top < 1.
DefectDirections defect_directions(const Checkpoint& checkpoint, const DefectOptions& options = {});
// The checkpoint behind a loaded model (its weights as stored, not as packed for a precision).
DefectDirections defect_directions(const Model& model, const DefectOptions& options = {});

// DIR/defects.safetensors (directions [layers, dim], singular_values [layers, top], the fit in
// its metadata) and DIR/defects.json (the same numbers and the fit, for reading). Atomic.
void write_defects(const DefectDirections& defects, const std::string& dir);
// Reads a defects.safetensors (or the folder holding one); throws Error naming the file and what
// is missing or malformed.
DefectDirections read_defects(const std::string& path);
// Throws UsageError naming `what` when the directions do not fit a model of this depth and width.
void check_defects_fit(const DefectDirections& defects, int layers, int dim, const std::string& what);

}  // namespace vitreg
