#pragma once
// The forward's compute kernels over token matrices [rows, width] (row-major float32).
// Work is cut into tiles whose bounds depend only on the problem size, never on the thread
// count, so every thread count gives bit-identical results.
#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include <optional>
#include <string>

#include "gemm.hpp"
#include "gemm_lowp.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/config.hpp"
#include "vitreg/precision.hpp"

namespace vitreg::kernels {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// y = x · W^T + b, with W^T [in, out] packed once for the GEMM of the model's precision.
struct Linear {
    std::string name;  // the checkpoint's canonical name, e.g. "blocks.3.attn.qkv"
    Precision precision = Precision::Fp32;
    gemm::PackedMatrix wt;   // fp32, or bf16-rounded where the CPU lacks vdpbf16ps
    gemm::PackedBf16 wb;     // bf16 on vdpbf16ps
    // W read in place from the mapped checkpoint (its model keeps the file): nothing packed at
    // load. Blocks of W's rows, outputs o0 .. o0 + on, each [on][in / 2] pairs at w (bf16 on
    // vdpbf16ps; set instead of wb), [on][in / 4] quads of int8 (an int8 file's, on
    // AVX512-VNNI; set instead of wq.data, whose scale and sums it uses) or [on][in / 2] bytes of
    // two int4 codes (an int4 file's, on AVX512-VNNI, with w4_rows).
    struct MappedBlock {
        const std::uint32_t* w;
        int o0, on;
    };
    std::vector<MappedBlock> mapped;
    gemm::PackedInt8 wq;     // int8
    gemm::PackedInt4 w4;     // int4 (its input quantized as int8's, per token)
    // int4 in place: each output row's group scales and zeros [out][in / 128], the file's bf16
    // where they lie (2 bytes each, any alignment).
    struct Int4Rows {
        const unsigned char* scale = nullptr;
        const unsigned char* zero = nullptr;
    } w4_rows;
    std::optional<quant::AffineU8> fixed;  // int8 per-tensor: the calibrated input mapping
    Eigen::VectorXf bias;
    int in_ = 0, out_ = 0;
    int in() const { return in_; }
    int out() const { return out_; }
    // Weight bytes in memory vitreg allocated (packed, quantized, scales), and read in place.
    std::int64_t held_bytes() const;
    std::int64_t mapped_bytes() const {
        const std::int64_t values = std::int64_t{out_} * in_;
        return mapped.empty() ? 0 : precision == Precision::Int8 ? values : precision == Precision::Int4 ? values / 2 : values * 2;
    }
};

// Storage for the codes that make_linear quantizes before packing them, reused by the linears of
// one load (quant::quantize_channels).
struct QuantizeScratch {
    quant::Int8Weights int8;
    quant::Int4Weights int4;
};

// Packs W [out, in] (row-major) for `precision`; `fixed` is int8's per-tensor input mapping,
// `int8_weight_bits` its weights' width (8, or 7: see PrecisionOptions).
Linear make_linear(const float* w, int out, int in, Eigen::VectorXf bias, Precision precision,
                   std::optional<quant::AffineU8> fixed = std::nullopt, int int8_weight_bits = 8,
                   QuantizeScratch* scratch = nullptr);
// A bf16 linear whose W [out, in] (bf16 pairs along in, in even; its rows in `parts`, in order)
// stays where it lies (Linear::mapped).
Linear make_linear_mapped(const std::vector<Bf16Rows>& parts, int out, int in, Eigen::VectorXf bias);
// An int8 linear from weights quantized already (a quantized checkpoint's): q [out, in] within
// ±(2^(bits−1) − 1) and its per-output-channel `scale` [out]; packed, not quantized again.
// `sums` [out]: its rows' Σ q where known (Int8Tensor::sums), else found here.
Linear make_linear_int8(const std::int8_t* q, const float* scale, int out, int in, Eigen::VectorXf bias,
                        std::optional<quant::AffineU8> fixed, int int8_weight_bits, const std::int32_t* sums = nullptr);
// The same, read where it lies (Linear::mapped; gemm::int8_in_place()): q 4-byte aligned, in a
// multiple of 4, `sums` [out] its rows' Σ q.
Linear make_linear_int8_mapped(const std::int8_t* q, const float* scale, const std::int32_t* sums, int out, int in,
                               Eigen::VectorXf bias, std::optional<quant::AffineU8> fixed);
// The same, read where it lies (Linear::mapped; gemm::int8_in_place()): codes 4-byte aligned, in
// a multiple of 128; scale and zero the file's bf16 bytes, read where they lie too.
Linear make_linear_int4_mapped(const std::uint8_t* codes, const unsigned char* scale, const unsigned char* zero,
                               int out, int in, Eigen::VectorXf bias);
// An int4 linear from weights quantized already (an int4 file's, quant::Int4Weights' layout):
// codes [out][ceil(in / 2)], scale and zero [out][ceil(in / 128)] bf16; packed, not quantized again.
Linear make_linear_int4(const std::uint8_t* codes, const std::uint16_t* scale, const std::uint16_t* zero, int out, int in,
                        Eigen::VectorXf bias);

// A linear's input in the GEMM's precision (bf16 pairs, or uint8 with per-row scales): kept
// by the caller between layers and forwards.
struct LinearScratch {
    gemm::Buffer rounded;  // bf16-rounded floats, for the fp32 kernels
    gemm::Buffer packed;   // the input as the fp32 kernel's strips (gemm::pack_rows), where it reads those
    gemm::GroupBuffer groups;
    gemm::PackedRows input;  // weights in place: the input's bf16 pairs or uint8 quads as panels
    std::vector<float> scale;
    std::vector<std::int32_t> zero_point;
    std::vector<std::int32_t> group_terms;  // int4: Σ (u − zp) per row and group of k
};

struct Norm {
    Eigen::VectorXf weight, bias;
};

// What happens to a tile of x·W^T right after the GEMM, while it is in cache.
enum class Epilogue {
    Bias,          // out = y + b
    BiasGelu,      // out = gelu(y + b), exact erf GELU
    BiasQuickGelu, // out = z * sigmoid(1.702 z), z = y + b (OpenAI CLIP's QuickGELU)
    BiasGeluTanh,  // out = gelu_tanh(y + b), GELU's tanh approximation (SigLIP)
    ScaledResidual  // out += scale ⊙ (y + b)   (LayerScale and the residual add)
};

void linear(const float* x, int rows, const Linear& layer, float* out, Epilogue epilogue, LinearScratch& scratch,
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
    std::vector<gemm::PackedBf16> keys_bf16, values_bf16;
};

// How attention runs through the keys: whole rows of scores per query block (what the Probe's
// attention rows and key mass need), or key blocks with a running maximum and sum (online
// softmax), whose scores stay in L2 at any length. Auto picks key blocks from
// kKeyBlocksFromTokens tokens on, unless the record asks for rows or key mass.
enum class AttentionPath { Auto, WholeRows, KeyBlocks };
bool attention_by_key_blocks(int tokens, const AttentionRecord* record, AttentionPath path = AttentionPath::Auto);
// The bytes each thread's attention scratch (its score block and rounded operands) holds at
// this length on that path (forward_memory's estimate).
std::size_t attention_thread_bytes(int tokens, int head_dim, bool key_blocks);

// Multi-head attention of `batch` sequences of `tokens` tokens: qkv [batch*tokens, 3*dim]
// (q | k | v, head h in columns h*hd..), out [batch*tokens, dim]. Computed per (sequence,
// head, query block), so memory is O(tokens × block). With `bf16`, Q·Kᵀ and P·V run on
// bf16-rounded operands (the normalizer stays fp32). `evicted` [batch, heads, tokens] marks keys
// whose logit is −∞ for every query (Intervention), or is null.
void attention(const float* qkv, int batch, int tokens, int heads, int head_dim, AttentionKind kind,
               const Eigen::VectorXf& sinks, float* out, AttentionScratch& scratch, bool bf16,
               const AttentionRecord* record = nullptr, const std::uint8_t* evicted = nullptr,
               AttentionPath path = AttentionPath::Auto);

// Per token of x [rows, width]: L2 norm, max |x|, and the sums of x, x², x³, x⁴ (for kurtosis).
struct TokenMoments {
    std::vector<float> l2, max_abs;
    std::vector<double> sums;  // [rows, 4]
};
TokenMoments token_moments(const float* x, int rows, int width);

}  // namespace vitreg::kernels
