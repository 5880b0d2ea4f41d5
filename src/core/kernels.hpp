#pragma once
// The forward's compute kernels over token matrices [rows, width] (row-major float32).
// Work is cut into tiles whose bounds depend only on the problem size, never on the thread
// count, so every thread count gives bit-identical results.
#include <Eigen/Core>
#include <vector>

#include "gemm.hpp"
#include "vitreg/config.hpp"

namespace vitreg::kernels {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// y = x · W^T + b, with W^T packed once for the GEMM kernel.
struct Linear {
    gemm::PackedMatrix wt;  // [in, out]
    Eigen::VectorXf bias;
    int in() const { return wt.k; }
    int out() const { return wt.n; }
};

struct Norm {
    Eigen::VectorXf weight, bias;
};

// What happens to a tile of x·W^T right after the GEMM, while it is in cache.
enum class Epilogue {
    Bias,          // out = y + b
    BiasGelu,      // out = gelu(y + b), exact erf GELU
    ScaledResidual  // out += scale ⊙ (y + b)   (LayerScale and the residual add)
};

void linear(const float* x, int rows, const Linear& layer, float* out, Epilogue epilogue,
            const Eigen::VectorXf* scale = nullptr);

void layer_norm(const float* x, int rows, int width, const Norm& norm, float eps, float* out);

// h[rows, H] = silu(u[:, :H]) * u[:, H:] for u [rows, 2H].
void swiglu(const float* u, int rows, int hidden, float* h);

// Where one layer's attention probe writes (every pointer may be null: nothing recorded).
struct AttentionRecord {
    const int* query_slot = nullptr;  // [tokens]: slot of the query's row in `rows`, or -1
    int slots = 0;
    float* rows = nullptr;        // [batch, heads, slots, tokens] probabilities
    float* abstention = nullptr;  // [batch, heads, tokens] 1 - Σp per query
    float* key_mass = nullptr;    // [batch, heads, tokens] mean attention each key receives
};

// Keys and values packed per (sequence, head); the caller keeps them between layers and forwards.
struct AttentionScratch {
    std::vector<gemm::PackedMatrix> keys, values;
};

// Multi-head attention of `batch` sequences of `tokens` tokens: qkv [batch*tokens, 3*dim]
// (q | k | v, head h in columns h*hd..), out [batch*tokens, dim]. Computed per (sequence,
// head, query block) with the full key range, so memory is O(tokens × block).
void attention(const float* qkv, int batch, int tokens, int heads, int head_dim, AttentionKind kind,
               const Eigen::VectorXf& sinks, float* out, AttentionScratch& scratch,
               const AttentionRecord* record = nullptr);

// Per token of x [rows, width]: L2 norm, max |x|, and the sums of x, x², x³, x⁴ (for kurtosis).
struct TokenMoments {
    std::vector<float> l2, max_abs;
    std::vector<double> sums;  // [rows, 4]
};
TokenMoments token_moments(const float* x, int rows, int width);

}  // namespace vitreg::kernels
