#pragma once
// The forward's elementwise and row loops outside the GEMMs (exp and the attention normalizers,
// LayerNorm, the GELUs, SiLU gating, bf16 rounding, uint8 quantization, resampling's axpy),
// compiled once per kernel set from one source (vector_loops.inc) and chosen at run time with
// the GEMMs (cpu.hpp), so a portable build runs them as wide as the CPU allows.
//
// The loops sum in one fixed order (16 partial sums, then those in order) at every level. GCC
// fuses a multiply and an add into one FMA where the target has it (-ffp-contract=fast is its
// default, at -std=c++17 too), so the AVX levels may differ from the portable one in the last
// bit of a float result (test_vector_loops holds each against double precision); bf16 rounding,
// ranges and uint8 codes are the same bits at every level.
#include <cstddef>
#include <cstdint>

#include "cpu.hpp"
#include "quantize.hpp"
#include "core/attention.hpp"

namespace vitreg::loops {

struct Table {
    // The attention normalizer over one row of scores, in place (core/attention.hpp).
    float (*normalize_attention)(float* z, std::size_t n, AttentionKind kind, float sink);
    // Its two passes, for attention over key blocks (online softmax): the largest of z[0..n)
    // (−∞ for none), and z = e^(z − m) in place with the sum returned, in an order fixed by n.
    float (*row_max)(const float* z, std::size_t n);
    float (*exp_sum)(float* z, std::size_t n, float m);
    // out = (x − mean) / √(var + eps) · w + b over one row of n.
    void (*layer_norm_row)(const float* x, int n, const float* w, const float* b, float eps, float* out);
    // In place over rows × cols (row stride ld): exact-erf GELU, QuickGELU z·σ(1.702 z), and
    // GELU's tanh approximation.
    void (*gelu)(float* x, int rows, int cols, long ld);
    void (*quick_gelu)(float* x, int rows, int cols, long ld);
    void (*gelu_tanh)(float* x, int rows, int cols, long ld);
    // out = silu(a) · b over n.
    void (*silu_mul)(const float* a, const float* b, int n, float* out);
    // out[i] = bf16-rounded x[i] (as float), and bf16 pairs (even | odd << 16) of a row of k.
    void (*round_bf16)(const float* x, std::size_t n, float* out);
    void (*bf16_pairs)(const float* x, int k, std::uint32_t* out);
    // bf16 pairs of two rows, element by element: out[j] = even[j] | odd[j] << 16 (odd null: 0).
    void (*bf16_interleave)(const float* even, const float* odd, int n, std::uint32_t* out);
    // The min and max of a row of k (the range widened to hold 0), and the row quantized with q.
    void (*range)(const float* x, int k, float* lo, float* hi);
    void (*quantize_u8)(const float* x, int k, quant::AffineU8 q, std::uint8_t* out);
    // One channel of n weights quantized symmetric to ±qmax (quant::quantize_channels' rule):
    // their codes into out, their scale returned.
    float (*quantize_s8_row)(const float* w, int n, float qmax, std::int8_t* out);
    // One channel of len weights quantized to int4 per group of 128 (quant::quantize_groups'
    // rule): each group's bf16 scale and zero, and the codes two a byte into zeroed `codes`.
    void (*quantize_u4_row)(const float* w, int len, std::uint16_t* scale, std::uint16_t* zero, std::uint8_t* codes);
    // d += w · s over n.
    void (*axpy)(float w, const float* s, float* d, std::size_t n);
    // out = (Σ_t w[t] · rows[t]) · scale over n, the taps summed in order (upsampling's weighted
    // cells; the AVX levels may fuse each product into its sum).
    void (*weighted_rows)(const float* const* rows, const float* w, int taps, std::size_t n, float scale, float* out);
    // The reduced-precision GEMMs' epilogue over one row of `cols` accumulators (bias and scale
    // may be null): y = acc + bias, then c = y or c += scale ⊙ y (gemm.hpp's Epilogue); int8 first
    // dequantizes, acc = (a − zp · sums) · (sa · ws) with each row's zero point and scale and the
    // columns' Σ_k q and scales: `rows` rows of a (stride lda) into c (stride ldc) in one call.
    void (*finish_row)(const float* acc, int cols, const float* bias, const float* scale, float* c);
    void (*dequantize_rows)(const std::int32_t* a, int lda, int rows, int cols, const std::int32_t* zp,
                            const float* sa, const std::int32_t* sums, const float* ws, const float* bias,
                            const float* scale, float* c, long ldc);
    // int4 (gemm_lowp.hpp): n 16-bit words of four 4-bit codes into words of four int8 q − 8;
    // one group's int32 sums Σ u·(q − 8) (acc, stride lda) added to f as
    // f += ws · acc + wz · row_term, the columns' scale and zero and each row's Σ (u − zp) over the
    // group (row_term, stride term_stride); and the rows finished,
    // c = epilogue((f − zp · ws_sums) · sa), ws_sums the columns' Σ_g scale_g · Σ (q − 8).
    void (*unpack_int4)(const std::uint16_t* in, std::size_t n, std::uint32_t* out);
    void (*int4_accumulate)(const std::int32_t* acc, int lda, int rows, int cols, const float* ws, const float* wz,
                            const std::int32_t* row_term, int term_stride, float* f);
    void (*int4_finish)(const float* f, int ldf, int rows, int cols, const std::int32_t* zp, const float* ws_sums,
                        const float* sa, const float* bias, const float* scale, float* c, long ldc);
};

// The loops of one level, and those of the level this process runs (cpu::level()).
const Table& table(cpu::Level level);
const Table& active();

}  // namespace vitreg::loops
