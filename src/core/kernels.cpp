#include "kernels.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "transpose.hpp"
#include "vector_loops.hpp"
#include "core/attention.hpp"
#include "vitreg/error.hpp"

namespace vitreg::kernels {

namespace {

// Tile sizes. Every output element is computed whole by one task, so the tiling affects
// speed only, never the numbers. 96 rows (twelve 8-row or sixteen 6-row strips) × 96 columns
// (two 48-wide or six 16-wide panels): each B panel, which does not fit in L1 (384 × 48 floats
// is 72 KB), is read from L2 by many strips in a row. On a Xeon, one thread, 2088 × 384 ·
// 384 × 1152: 205 against 197 GFLOP/s with 24 rows (AVX-512), 117 against 111 (AVX2). A ViT-S
// linear at 224 px still makes 12–48 tasks for two threads.
constexpr int kTileSide = 96;
// Where k is long, both sides are halved until a tile's rows of A and columns of B (fp32, bf16
// or int8 values) fit in this much of L2 (96 × 96 in fp32 holds k up to 1536): ViT-B's fc2
// (k = 3072) at batch 1 on the Xeon ran at 73–78% of the peak with 96 × 96 tiles, 75–86% with
// 48 × 48. Halving keeps the side a multiple of every strip height (8, 6, 4).
constexpr std::size_t kTileBytes = 1280 * 1024;
int tile_side(int k, std::size_t value_bytes) {
    int side = kTileSide;
    while (side > 24 && 2 * static_cast<std::size_t>(side) * k * value_bytes > kTileBytes) side /= 2;
    return side;
}
// int4 weights are unpacked to int8 by each task, once for all its tokens: its tiles of tokens are
// made 4, 2 or 1 times as long, the most that leaves four tasks per worker thread (`tiles` along
// the tokens, `across` the other way). At one tile's length a ViT-L's int4 linears spent 10% of
// their time unpacking (96 tokens), and the 7B's in place 7% (about 100).
int int4_tile_times(int tiles, int across) {
    const int enough = 4 * tbb::this_task_arena::max_concurrency();
    for (int times = 4; times > 1; times /= 2)
        if ((tiles + times - 1) / times * across >= enough) return times;
    return 1;
}
constexpr int kQueryBlock = 64;
// Attention over key blocks (online softmax): keys in blocks of kKeyBlock, a multiple of every
// panel width (16, 32, 48, 64) so that a block's scores are whole panels of the packed keys;
// its query blocks kKeyQueryBlock rows. The score block (128 × 384 floats, 192 KB) and the
// block's keys and values stay in L2 however many tokens there are.
constexpr int kKeyBlock = 384;
constexpr int kKeyQueryBlock = 128;
// Where key blocks take over from whole rows (Auto): 2048 tokens, where the whole-row score block
// (64 × N floats, 512 KB) fills half of a Zen 5 core's 1 MB L2. Not yet measured: on the shared
// 2-core machine the two paths were within its noise from 434 to 1022 px (966 to 5334 tokens);
// bench/attention_crossover.sh measures it on a quiet one.
constexpr int kKeyBlocksFromTokens = 2048;
constexpr int kRowsPerTask = 64;  // LayerNorm and SwiGLU rows per task
// Mapped bf16 weights: a tile's (W · xᵀ) is turned into token rows this many at a time, each
// source line read once.
constexpr int kTransposeRows = 16;

// Runs fn(i) for i in [0, n) as independent tasks; simple_partitioner keeps the split fixed.
template <class Fn>
void for_each_task(int n, const Fn& fn) {
    tbb::parallel_for(
        tbb::blocked_range<int>(0, n, 1),
        [&](const tbb::blocked_range<int>& r) {
            for (int i = r.begin(); i != r.end(); ++i) fn(i);
        },
        tbb::simple_partitioner());
}

// One block of T per worker thread (scores; bf16 operands), kept across tasks and forwards: the
// attention loop allocates nothing once it has seen its largest sequence. Safe to share between
// tasks because an attention task never waits, so no other task can run on its thread while it
// holds it. Tag tells apart two buffers of one type that a task holds at once.
template <class T, int Tag = 0>
T* thread_scratch(std::size_t n) {
    static thread_local std::vector<T, gemm::AlignedAllocator<T>> scratch;
    return gemm::at_least(scratch, n);
}

// A linear's shape and bias, before its weights.
Linear shell(Precision precision, int out, int in, Eigen::VectorXf bias) {
    Linear l;
    l.precision = precision;
    l.in_ = in;
    l.out_ = out;
    l.bias = std::move(bias);
    return l;
}

// In place: W's rows (row_bytes each, from `rows`) in blocks of a GEMM tile's rows.
void add_blocks(Linear& l, const void* rows, std::size_t row_bytes) {
    const int side = tile_side(l.in(), 1);
    for (int o0 = 0; o0 < l.out(); o0 += side)
        l.mapped.push_back({reinterpret_cast<const std::uint32_t*>(static_cast<const unsigned char*>(rows) + o0 * row_bytes),
                            o0, std::min(side, l.out() - o0)});
}
}  // namespace

Linear make_linear(const float* w, int out, int in, Eigen::VectorXf bias, Precision precision,
                   std::optional<quant::AffineU8> fixed, int int8_weight_bits, QuantizeScratch* scratch) {
    QuantizeScratch own;
    QuantizeScratch& codes = scratch ? *scratch : own;
    if (precision == Precision::Int8) {  // quantized per row of W (an output channel), as a quantized file stores it
        const quant::Int8Weights& q = codes.int8;
        quant::quantize_channels(w, out, in, in, 1, int8_weight_bits, codes.int8);
        return make_linear_int8(q.q.data(), q.scale.data(), out, in, std::move(bias), fixed, int8_weight_bits);
    }
    if (precision == Precision::Int4) {  // grouped along each row of W, as an int4 file stores it
        const quant::Int4Weights& q = codes.int4;
        quant::quantize_groups(w, out, in, in, 1, codes.int4);
        return make_linear_int4(q.codes.data(), q.scale.data(), q.zero.data(), out, in, std::move(bias));
    }
    Linear l = shell(precision, out, in, std::move(bias));
    if (precision == Precision::Bf16 && gemm::native_bf16()) {  // packed from W's rows, no transposed copy
        gemm::pack_weights_into(l.wb, w, out, in);
        return l;
    }
    // Wᵀ packed from W's rows, each read once in order (bf16: operands rounded, through fp32): a
    // transposed copy first, fresh pages written one strided value at a time, had taken most of
    // a ViT-L's 7–9 s fp32 load on a Zen 5.
    gemm::pack_transposed_into(l.wt, w, out, in, in, 1.0f, gemm::best(), precision == Precision::Bf16);
    return l;
}

std::int64_t Linear::held_bytes() const {
    const auto bytes = [](const auto& v) { return static_cast<std::int64_t>(v.size() * sizeof(v[0])); };
    return bytes(wt.data) + bytes(wb.data) + bytes(wq.data) + bytes(wq.scale) + bytes(wq.sums) + bytes(w4.data) +
           bytes(w4.scale) + bytes(w4.zero) + bytes(w4.sums) + static_cast<std::int64_t>(bias.size()) * 4;
}

Linear make_linear_mapped(const std::vector<Bf16Rows>& parts, int out, int in, Eigen::VectorXf bias) {
    if (in % 2 || !gemm::bf16_in_place()) throw Error("mapped bf16 weights need an even width and vdpbf16ps");
    Linear l = shell(Precision::Bf16, out, in, std::move(bias));
    // Blocks of a GEMM tile's rows, none across two parts.
    const int side = tile_side(in, 2);
    int o0 = 0;
    for (const Bf16Rows& part : parts)
        for (std::int64_t r = 0; r < part.rows; r += side) {
            const int on = static_cast<int>(std::min<std::int64_t>(side, part.rows - r));
            l.mapped.push_back({part.pairs + r * (in / 2), o0, on});
            o0 += on;
        }
    if (o0 != out) throw Error("mapped bf16 weights: the parts hold " + std::to_string(o0) + " rows, not " + std::to_string(out));
    return l;
}

Linear make_linear_int8(const std::int8_t* q, const float* scale, int out, int in, Eigen::VectorXf bias,
                        std::optional<quant::AffineU8> fixed, int int8_weight_bits, const std::int32_t* sums) {
    Linear l = shell(Precision::Int8, out, in, std::move(bias));
    l.wq = gemm::pack_int8(q, scale, in, out, gemm::int8_kernel(int8_weight_bits), int8_weight_bits, sums);
    l.fixed = fixed;
    return l;
}

Linear make_linear_int8_mapped(const std::int8_t* q, const float* scale, const std::int32_t* sums, int out, int in,
                               Eigen::VectorXf bias, std::optional<quant::AffineU8> fixed) {
    if (in % 4 || reinterpret_cast<std::uintptr_t>(q) % 4 || !gemm::int8_in_place())
        throw Error("mapped int8 weights need 4-byte aligned rows, a width a multiple of 4 and AVX512-VNNI");
    Linear l = shell(Precision::Int8, out, in, std::move(bias));
    l.fixed = fixed;
    l.wq.k = in;
    l.wq.n = out;
    l.wq.isa = gemm::Int8Isa::Avx512Vnni;
    l.wq.scale.assign(scale, scale + out);
    l.wq.sums.assign(sums, sums + out);
    add_blocks(l, q, in);
    return l;
}

Linear make_linear_int4_mapped(const std::uint8_t* codes, const unsigned char* scale, const unsigned char* zero,
                               int out, int in, Eigen::VectorXf bias) {
    if (in % quant::kInt4Group || reinterpret_cast<std::uintptr_t>(codes) % 4 || !gemm::int8_in_place())
        throw Error("mapped int4 weights need 4-byte aligned rows, a width a multiple of 128 and AVX512-VNNI");
    Linear l = shell(Precision::Int4, out, in, std::move(bias));
    l.w4_rows = {scale, zero};
    add_blocks(l, codes, in / 2);
    return l;
}

Linear make_linear_int4(const std::uint8_t* codes, const std::uint16_t* scale, const std::uint16_t* zero, int out, int in,
                        Eigen::VectorXf bias) {
    Linear l = shell(Precision::Int4, out, in, std::move(bias));
    l.w4 = gemm::pack_int4(codes, scale, zero, in, out);
    return l;
}

namespace {

// The activation an epilogue ends with, over a finished tile of `out` (row stride ld).
void activate(Epilogue epilogue, float* tile, int rows, int cols, int ld) {
    const loops::Table& vec = loops::active();
    if (epilogue == Epilogue::BiasGelu) vec.gelu(tile, rows, cols, ld);
    else if (epilogue == Epilogue::BiasQuickGelu) vec.quick_gelu(tile, rows, cols, ld);
    else if (epilogue == Epilogue::BiasGeluTanh) vec.gelu_tanh(tile, rows, cols, ld);
}

// x · Wᵀ with W's rows read in place (Linear::mapped): W is the side the kernel broadcasts and
// x, packed as panels of tokens, the side it loads, so a tile holds (W · xᵀ) for a block of
// outputs × tokens (T: float for bf16, int32 for int8); `multiply(block, t0, tn, product)` fills
// it [on][tn], and each kTransposeRows tokens' rows of it go to `finish(block, token, count,
// rows [count][side])`, which finishes them into `out` as the packed path finishes its rows.
template <class T, class Multiply, class Finish>
void run_mapped(const Linear& layer, int rows, int nr, int side, float* out, Epilogue epilogue, const Multiply& multiply,
                const Finish& finish) {
    const int width = layer.out(), panels_per_tile = std::max(1, side / nr), out_tiles = static_cast<int>(layer.mapped.size());
    int span = panels_per_tile * nr;
    if (layer.precision == Precision::Int4) span *= int4_tile_times((rows + span - 1) / span, out_tiles);
    const int token_tiles = gemm::joined_tiles(rows, span);  // as the input's panels
    // The weights are the operand read from memory: each block of their rows serves every token
    // tile in turn while it is in L2.
    for_each_task(out_tiles * token_tiles, [&](int t) {
        const Linear::MappedBlock& block = layer.mapped[t / token_tiles];
        const int t0 = t % token_tiles * span, tn = t % token_tiles == token_tiles - 1 ? rows - t0 : span;
        T* product = thread_scratch<T>(static_cast<std::size_t>(side) * (span + 16 + kTransposeRows));
        T* rows_of = product + static_cast<std::size_t>(side) * (span + 16);  // kTransposeRows tokens' rows
        multiply(block, t0, tn, product);
        static_assert(sizeof(T) == 4, "32-bit products");
        for (int i0 = 0; i0 < tn; i0 += kTransposeRows) {
            const int count = std::min(kTransposeRows, tn - i0);
            gemm::transpose32(reinterpret_cast<const std::uint32_t*>(product + i0), tn, block.on, count,
                              reinterpret_cast<std::uint32_t*>(rows_of), side);
            finish(block, t0 + i0, count, rows_of);
        }
        activate(epilogue, out + static_cast<std::size_t>(t0) * width + block.o0, tn, block.on, width);
    });
}

// bf16: the input rounded to pairs as the packed path rounds it.
void linear_mapped_bf16(const float* x, int rows, const Linear& layer, float* out, Epilogue epilogue,
                        LinearScratch& scratch, const Eigen::VectorXf* scale) {
    const int in = layer.in(), width = layer.out(), side = tile_side(in, 2);
    gemm::PackedRows& tokens = scratch.input;
    gemm::pack_rows(tokens, rows, in / 2, [&](int r0, int rn, std::uint32_t* pairs) {
        gemm::round_rows_bf16(x + static_cast<std::size_t>(r0) * in, in, rn, in, pairs);
    });
    const float* bias = layer.bias.data();
    const float* scales = epilogue == Epilogue::ScaledResidual ? scale->data() : nullptr;
    const loops::Table& vec = loops::active();
    run_mapped<float>(
        layer, rows, tokens.nr, side, out, epilogue,
        [&](const Linear::MappedBlock& b, int t0, int tn, float* product) {
            gemm::multiply_rows(b.w, b.on, tokens, t0, t0 + tn, product, tn);
        },
        [&](const Linear::MappedBlock& b, int token, int count, const float* rows_of) {
            for (int i = 0; i < count; ++i)
                vec.finish_row(rows_of + i * side, b.on, bias + b.o0, scales ? scales + b.o0 : nullptr,
                               out + static_cast<std::size_t>(token + i) * width + b.o0);
        });
}

// int8: the input quantized as the packed path quantizes it, and each token's integers
// dequantized by the same rule.
void linear_mapped_int8(const float* x, int rows, const Linear& layer, float* out, Epilogue epilogue,
                        LinearScratch& scratch, const Eigen::VectorXf* scale) {
    const int in = layer.in(), width = layer.out(), side = tile_side(in, 1);
    float* row_scale = gemm::at_least(scratch.scale, static_cast<std::size_t>(rows));
    std::int32_t* row_zero = gemm::at_least(scratch.zero_point, static_cast<std::size_t>(rows));
    gemm::PackedRows& tokens = scratch.input;
    gemm::pack_rows(tokens, rows, in / 4, [&](int r0, int rn, std::uint32_t* quads) {
        gemm::quantize_rows(x + static_cast<std::size_t>(r0) * in, in, rn, in, layer.fixed ? &*layer.fixed : nullptr, quads,
                            row_scale + r0, row_zero + r0);
    });
    const float* bias = layer.bias.data();
    const float* scales = epilogue == Epilogue::ScaledResidual ? scale->data() : nullptr;
    const loops::Table& vec = loops::active();
    run_mapped<std::int32_t>(
        layer, rows, tokens.nr, side, out, epilogue,
        [&](const Linear::MappedBlock& b, int t0, int tn, std::int32_t* product) {
            gemm::multiply_rows(b.w, b.on, tokens, t0, t0 + tn, product, tn);
        },
        [&](const Linear::MappedBlock& b, int token, int count, const std::int32_t* rows_of) {
            vec.dequantize_rows(rows_of, side, count, b.on, row_zero + token, row_scale + token, layer.wq.sums.data() + b.o0,
                                layer.wq.scale.data() + b.o0, bias + b.o0, scales ? scales + b.o0 : nullptr,
                                out + static_cast<std::size_t>(token) * width + b.o0, width);
        });
}

// int4: the input quantized as int8's with each group's Σ (u − zp), and per task W's codes
// unpacked to int8 (q − 8) and run one group of 128 at a time, each group's int32 sums scaled
// into fp32 ones as the packed path does (the same operands in the same order: its bits).
void linear_mapped_int4(const float* x, int rows, const Linear& layer, float* out, Epilogue epilogue,
                        LinearScratch& scratch, const Eigen::VectorXf* scale) {
    const int in = layer.in(), width = layer.out(), side = tile_side(in, 1), groups = in / 4;
    const int blocks = in / quant::kInt4Group;
    float* row_scale = gemm::at_least(scratch.scale, static_cast<std::size_t>(rows));
    std::int32_t* row_zero = gemm::at_least(scratch.zero_point, static_cast<std::size_t>(rows));
    // [blocks][stride]: read by whole panels, so up to 64 past the last token
    const int stride = rows + 64;
    std::int32_t* terms = gemm::at_least(scratch.group_terms, static_cast<std::size_t>(stride) * blocks);
    gemm::PackedRows& tokens = scratch.input;
    gemm::pack_rows(tokens, rows, groups, [&](int r0, int rn, std::uint32_t* quads) {
        gemm::quantize_rows(x + static_cast<std::size_t>(r0) * in, in, rn, in, nullptr, quads, row_scale + r0, row_zero + r0);
        std::int32_t* own = thread_scratch<std::int32_t>(static_cast<std::size_t>(rn) * blocks);
        gemm::int4_row_terms(gemm::QuantizedRows{quads, row_scale + r0, row_zero + r0}, rn, in, own);
        gemm::transpose32(reinterpret_cast<const std::uint32_t*>(own), blocks, rn, blocks,
                          reinterpret_cast<std::uint32_t*>(terms + r0), stride);
    });
    const float* bias = layer.bias.data();
    const float* scales = epilogue == Epilogue::ScaledResidual ? scale->data() : nullptr;
    const Linear::Int4Rows& w = layer.w4_rows;
    const loops::Table& vec = loops::active();
    run_mapped<float>(
        layer, rows, tokens.nr, side, out, epilogue,
        [&](const Linear::MappedBlock& b, int t0, int tn, float* f) {
            std::uint32_t* q = thread_scratch<std::uint32_t>(static_cast<std::size_t>(b.on) * groups);
            const auto* codes = reinterpret_cast<const std::uint16_t*>(b.w);  // four codes a 16-bit word, as stored
            for (int o = 0; o < b.on; ++o)
                vec.unpack_int4(codes + static_cast<std::size_t>(o) * groups, groups, q + static_cast<std::size_t>(o) * groups);
            const std::size_t at = 2 * static_cast<std::size_t>(b.o0) * blocks;  // bytes of bf16
            // The zero point's term of these rows, for `finish` in this task: found here, not at
            // load, where a 7B's would be 3.2 GB of codes read and 160 MB more held.
            gemm::int4_scaled_sums(reinterpret_cast<const std::uint8_t*>(b.w), b.on, in, w.scale + at,
                                   thread_scratch<float, 1>(static_cast<std::size_t>(b.on)));
            // The block this thread most likely runs next (tasks go to threads in ranges) is read
            // from the file while this one computes.
            gemm::Prefetch next;
            if (t0 + tn == rows && &b + 1 < layer.mapped.data() + layer.mapped.size())
                next = {reinterpret_cast<const char*>((&b + 1)->w), static_cast<long>((&b + 1)->on) * groups * 2 / 64};
            gemm::multiply_rows_int4(q, b.on, tokens, t0, t0 + tn, w.scale + at, w.zero + at, terms, stride, f, tn, next);
        },
        [&](const Linear::MappedBlock& b, int token, int count, const float* rows_of) {
            vec.int4_finish(rows_of, side, count, b.on, row_zero + token, thread_scratch<float, 1>(b.on), row_scale + token,
                            bias + b.o0, scales ? scales + b.o0 : nullptr, out + static_cast<std::size_t>(token) * width + b.o0,
                            width);
        });
}

}  // namespace

void linear(const float* x, int rows, const Linear& layer, float* out, Epilogue epilogue, LinearScratch& scratch,
            const Eigen::VectorXf* scale) {
    if (!layer.mapped.empty())
        return layer.precision == Precision::Int8   ? linear_mapped_int8(x, rows, layer, out, epilogue, scratch, scale)
               : layer.precision == Precision::Int4 ? linear_mapped_int4(x, rows, layer, out, epilogue, scratch, scale)
                                                    : linear_mapped_bf16(x, rows, layer, out, epilogue, scratch, scale);
    const int in = layer.in(), width = layer.out();
    // bf16 without vdpbf16ps: rounded operands through the fp32 kernel.
    const bool rounded = layer.precision == Precision::Bf16 && !gemm::native_bf16();
    const Precision precision = rounded ? Precision::Fp32 : layer.precision;
    const bool quantized = precision == Precision::Int8 || precision == Precision::Int4;  // uint8 input rows
    const int nr = precision == Precision::Fp32   ? layer.wt.nr
                   : precision == Precision::Bf16 ? layer.wb.nr
                   : precision == Precision::Int8 ? layer.wq.nr
                                                  : layer.w4.nr;
    // Reduced precision: the input rounded or quantized once, row tiles in parallel.
    const int groups = precision == Precision::Bf16 ? (in + 1) / 2 : (in + 3) / 4;
    const int side = tile_side(in, precision == Precision::Fp32 ? 4 : precision == Precision::Bf16 ? 2 : 1);
    const int row_tiles = (rows + side - 1) / side;
    const std::size_t n = static_cast<std::size_t>(rows);
    // fp32 kernels that read A as strips get it packed once here, not once per column tile
    // (bf16-rounded there too); the others read it in place (or rounded into `rounded_x`).
    const int strip = precision == Precision::Fp32 ? gemm::packed_strip(layer.wt) : 0;
    float* packed = strip ? gemm::at_least(scratch.packed, n * in) : nullptr;
    float* rounded_x = rounded && !strip ? gemm::at_least(scratch.rounded, n * in) : nullptr;
    std::uint32_t* low = precision != Precision::Fp32 ? gemm::at_least(scratch.groups, n * groups) : nullptr;
    float* row_scale = quantized ? gemm::at_least(scratch.scale, n) : nullptr;
    std::int32_t* row_zero = quantized ? gemm::at_least(scratch.zero_point, n) : nullptr;
    const int blocks = (in + quant::kInt4Group - 1) / quant::kInt4Group;
    std::int32_t* terms = precision == Precision::Int4 ? gemm::at_least(scratch.group_terms, n * blocks) : nullptr;
    const loops::Table& vec = loops::active();
    if (rounded || strip || precision != Precision::Fp32)
        for_each_task(row_tiles, [&](int t) {
            const int r0 = t * side, rn = std::min(side, rows - r0);
            const float* src = x + static_cast<std::size_t>(r0) * in;
            const std::size_t values = static_cast<std::size_t>(rn) * in;
            if (strip) {  // the side is a multiple of every strip height, so tiles hold whole strips
                float* dst = packed + static_cast<std::size_t>(r0) * in;
                gemm::pack_rows(src, in, rn, in, strip, dst);
                if (rounded) vec.round_bf16(dst, values, dst);  // in place, while it is in cache
            } else if (rounded)
                vec.round_bf16(src, values, rounded_x + static_cast<std::size_t>(r0) * in);
            else if (precision == Precision::Bf16)
                gemm::round_rows_bf16(src, in, rn, in, low + static_cast<std::size_t>(r0) * groups);
            else if (quantized) {
                std::uint32_t* rows_out = low + static_cast<std::size_t>(r0) * groups;
                gemm::quantize_rows(src, in, rn, in, layer.fixed ? &*layer.fixed : nullptr, rows_out, row_scale + r0,
                                    row_zero + r0);
                if (terms)
                    gemm::int4_row_terms(gemm::QuantizedRows{rows_out, row_scale + r0, row_zero + r0}, rn, in,
                                         terms + static_cast<std::size_t>(r0) * blocks);
            }
        });
    if (rounded_x) x = rounded_x;
    // Column tiles are whole kernel panels (side / nr of them); row tiles `side` rows (int4: up to
    // four times that).
    const int panel_count = (width + nr - 1) / nr;
    const int panels_per_tile = std::max(1, side / nr);
    const int col_tiles = (panel_count + panels_per_tile - 1) / panels_per_tile;
    const int row_side = precision == Precision::Int4 ? side * int4_tile_times(row_tiles, col_tiles) : side;
    const int tall_tiles = (rows + row_side - 1) / row_side;
    const gemm::Epilogue fused{layer.bias.data(), epilogue == Epilogue::ScaledResidual ? scale->data() : nullptr};
    // Tasks in the order that re-reads the smaller operand: when the weights outweigh the input
    // (few rows: batch 1), each column tile of B serves every row tile while it is in L2, and A
    // is the one read again; else each row tile of A serves every column tile. On this Xeon,
    // ViT-B/14 at batch 1 and 1 thread: B had been read from L3 once per row tile.
    const bool column_major = static_cast<long>(rows) < static_cast<long>(width);
    for_each_task(tall_tiles * col_tiles, [&](int t) {
        const int rt = column_major ? t % tall_tiles : t / col_tiles, ct = column_major ? t / tall_tiles : t % col_tiles;
        const int r0 = rt * row_side, rn = std::min(row_side, rows - r0);
        const int c0 = ct * panels_per_tile * nr, cn = std::min(panels_per_tile * nr, width - c0);
        float* tile = out + static_cast<std::size_t>(r0) * width + c0;
        const std::uint32_t* a = low ? low + static_cast<std::size_t>(r0) * groups : nullptr;
        switch (precision) {
            case Precision::Fp32:
                if (strip)
                    gemm::multiply_packed(packed + static_cast<std::size_t>(r0) * in, rn, layer.wt, c0, c0 + cn, tile,
                                          width, fused);
                else
                    gemm::multiply(x + static_cast<std::size_t>(r0) * in, in, rn, layer.wt, c0, c0 + cn, tile, width, fused);
                break;
            case Precision::Bf16: gemm::multiply(a, rn, layer.wb, c0, c0 + cn, tile, width, fused); break;
            case Precision::Int8:
                gemm::multiply(gemm::QuantizedRows{a, row_scale + r0, row_zero + r0}, rn, layer.wq, c0, c0 + cn, tile,
                               width, fused);
                break;
            case Precision::Int4:
                gemm::multiply(gemm::QuantizedRows{a, row_scale + r0, row_zero + r0, terms + static_cast<std::size_t>(r0) * blocks},
                               rn, layer.w4, c0, c0 + cn, tile, width, fused);
                break;
        }
        activate(epilogue, tile, rn, cn, width);
    });
}

void layer_norm(const float* x, int rows, int width, const Norm& norm, float eps, float* out) {
    for_each_task((rows + kRowsPerTask - 1) / kRowsPerTask, [&](int t) {
        const loops::Table& vec = loops::active();
        for (int r = t * kRowsPerTask, end = std::min(rows, r + kRowsPerTask); r < end; ++r)
            vec.layer_norm_row(x + static_cast<std::size_t>(r) * width, width, norm.weight.data(), norm.bias.data(), eps,
                               out + static_cast<std::size_t>(r) * width);
    });
}

void swiglu(const float* u, int rows, int hidden, float* h) {
    for_each_task((rows + kRowsPerTask - 1) / kRowsPerTask, [&](int t) {
        const loops::Table& vec = loops::active();
        for (int r = t * kRowsPerTask, end = std::min(rows, r + kRowsPerTask); r < end; ++r) {
            const float* a = u + static_cast<std::size_t>(r) * 2 * hidden;
            vec.silu_mul(a, a + hidden, hidden, h + static_cast<std::size_t>(r) * hidden);
        }
    });
}

namespace {

// Keys (as scale·Kᵀ, so queries are read in place) and values packed once per (sequence, head),
// shared by its query blocks; values in `value_blocks` row blocks of `key_block` keys (one: whole).
// bf16 runs on vdpbf16ps where the CPU has it; elsewhere its bf16-rounded operands go through the
// fp32 kernels (exact products, fp32 sums: the same up to summation order), which is faster than
// replaying vdpbf16ps lane by lane.
void pack_keys_values(const float* qkv, int batch, int tokens, int heads, int head_dim, bool bf16, bool native,
                      int key_block, int value_blocks, AttentionScratch& scratch) {
    const int dim = heads * head_dim, stride = 3 * dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const std::size_t pairs = static_cast<std::size_t>(batch) * heads, packed_values = pairs * value_blocks;
    if (native) {
        if (scratch.keys_bf16.size() < pairs) scratch.keys_bf16.resize(pairs);
        if (scratch.values_bf16.size() < packed_values) scratch.values_bf16.resize(packed_values);
    } else {
        if (scratch.keys.size() < pairs) scratch.keys.resize(pairs);
        if (scratch.values.size() < packed_values) scratch.values.resize(packed_values);
    }
    for_each_task(batch * heads, [&](int bh) {
        const float* seq = qkv + static_cast<std::size_t>(bh / heads) * tokens * stride + (bh % heads) * head_dim;
        if (native) gemm::pack_transposed_into(scratch.keys_bf16[bh], seq + dim, tokens, head_dim, stride, scale);
        else gemm::pack_transposed_into(scratch.keys[bh], seq + dim, tokens, head_dim, stride, scale, gemm::best(), bf16);
        for (int j = 0; j < value_blocks; ++j) {
            const int k0 = j * key_block, kn = std::min(key_block, tokens - k0);
            const float* v = seq + 2 * dim + static_cast<std::size_t>(k0) * stride;
            const std::size_t at = static_cast<std::size_t>(bh) * value_blocks + j;
            if (native) gemm::pack_into(scratch.values_bf16[at], v, kn, head_dim, stride);
            else gemm::pack_into(scratch.values[at], v, kn, head_dim, stride, gemm::best(), bf16);
        }
    });
}

// s[0:qn, 0:kn] = (queries · scale·Kᵀ)[:, k0:k0+kn], row stride lds. `low` holds the queries as
// bf16 pairs where `native`; `rounded` their bf16-rounded floats where bf16 is emulated.
void scores(const float* queries, long stride, int qn, const AttentionScratch& scratch, int bh, bool native,
            const std::uint32_t* low, const float* rounded, int head_dim, int k0, int kn, float* s, long lds) {
    if (native) gemm::multiply(low, qn, scratch.keys_bf16[bh], k0, k0 + kn, s, lds);
    else if (rounded) gemm::multiply(rounded, head_dim, qn, scratch.keys[bh], k0, k0 + kn, s, lds);
    else gemm::multiply(queries, stride, qn, scratch.keys[bh], k0, k0 + kn, s, lds);
}

// out[0:qn, 0:head_dim] (row stride ldo) = p[0:qn, 0:kn] (row stride ldp) · the packed values
// `at`; p is rounded to bf16 first under bf16 (into `low` where native, in place otherwise).
void mix(float* p, int qn, int kn, long ldp, const AttentionScratch& scratch, std::size_t at, bool bf16, bool native,
         std::uint32_t* low, int head_dim, float* out, long ldo) {
    if (native) {
        gemm::round_rows_bf16(p, ldp, qn, kn, low);
        gemm::multiply(low, qn, scratch.values_bf16[at], 0, head_dim, out, ldo);
        return;
    }
    if (bf16)
        for (int i = 0; i < qn; ++i) loops::active().round_bf16(p + i * ldp, static_cast<std::size_t>(kn), p + i * ldp);
    gemm::multiply(p, ldp, qn, scratch.values[at], 0, head_dim, out, ldo);
}

// The queries of one block as the score GEMM reads them under bf16: pairs where native, else
// rounded floats into `rounded` (fp32: neither, read in place).
void round_queries(const float* queries, long stride, int qn, int head_dim, bool bf16, bool native,
                   std::uint32_t* low, float* rounded) {
    if (native) gemm::round_rows_bf16(queries, stride, qn, head_dim, low);
    else if (bf16)
        for (int i = 0; i < qn; ++i)
            loops::active().round_bf16(queries + static_cast<std::size_t>(i) * stride, head_dim, rounded + i * head_dim);
}

}  // namespace

namespace {

// VITREG_ATTENTION=rows|blocks puts every Auto choice on one path, as VITREG_ISA forces a kernel
// set: for bench/attention_crossover.sh, which times both at each length.
AttentionPath forced_path() {
    static const AttentionPath forced = [] {
        const char* env = std::getenv("VITREG_ATTENTION");
        if (!env || !*env) return AttentionPath::Auto;
        const std::string name = env;
        if (name == "rows") return AttentionPath::WholeRows;
        if (name == "blocks") return AttentionPath::KeyBlocks;
        throw Error("VITREG_ATTENTION='" + name + "' is not an attention path (rows or blocks)");
    }();
    return forced;
}

}  // namespace

bool attention_by_key_blocks(int tokens, const AttentionRecord* record, AttentionPath path) {
    if (record && (record->rows || record->key_mass)) return false;  // they read whole normalized rows
    if (path == AttentionPath::Auto) path = forced_path();
    if (path != AttentionPath::Auto) return path == AttentionPath::KeyBlocks;
    return tokens >= kKeyBlocksFromTokens;
}

std::size_t attention_thread_bytes(int tokens, int head_dim, bool key_blocks) {
    const std::size_t rows = key_blocks ? kKeyQueryBlock : kQueryBlock, keys = key_blocks ? kKeyBlock : tokens;
    const std::size_t floats = rows * (keys + 3 * static_cast<std::size_t>(head_dim) + 3);
    const std::size_t pairs = rows * 2 * std::max<std::size_t>((head_dim + 1) / 2, (keys + 1) / 2);
    return (floats + pairs) * 4;
}

namespace {

// One attention call's operands, read by each of its tasks.
struct AttentionJob {
    const float* qkv;  // [batch, tokens, 3 · heads · head_dim]
    int tokens, heads, head_dim, dim, stride;
    AttentionKind kind;
    bool abstains;  // a null slot: softmax-1 or the sink
    const Eigen::VectorXf& sinks;
    float* out;
    const AttentionScratch& scratch;  // the packed keys and values
    bool bf16, native;
    int value_blocks;
    const AttentionRecord* record;
    const std::uint8_t* evicted;
    const loops::Table& vec;

    const float* queries_of(int bh, int q0) const {
        return qkv + (static_cast<std::size_t>(bh / heads) * tokens + q0) * stride + (bh % heads) * head_dim;
    }
    float* mixed_of(int bh, int q0) const {
        return out + (static_cast<std::size_t>(bh / heads) * tokens + q0) * dim + (bh % heads) * head_dim;
    }
    const std::uint8_t* evicted_of(int bh) const { return evicted ? evicted + static_cast<std::size_t>(bh) * tokens : nullptr; }
    float sink_of(int bh) const { return kind == AttentionKind::Sink ? sinks[bh % heads] : 0.0f; }
};

// Query rows [q0, q0 + qn) of (sequence, head) bh over the key blocks, by online softmax
// (docs/design.md, "Attention normalizers"): per query row a running maximum m, sum l and output
// o over the key blocks; a block with a larger maximum rescales l and o by e^(m_old − m_new).
// Softmax-1 and the sink start at the virtual key of logit s (0 for softmax-1): m = s, l = 1;
// softmax at m = −∞, l = 0. At the end o / l is the output and e^(s − m) / l the abstention, as
// normalize_attention gives.
void attend_by_key_blocks(const AttentionJob& job, int bh, int q0, int qn) {
    const int tokens = job.tokens, head_dim = job.head_dim;
    const bool native = job.native, bf16 = job.bf16;
    const int groups = std::max((head_dim + 1) / 2, (kKeyBlock + 1) / 2);
    float* s = thread_scratch<float>(static_cast<std::size_t>(qn) * (kKeyBlock + 3 * head_dim) + 3 * qn);
    float* acc = s + static_cast<std::size_t>(qn) * kKeyBlock;  // o, unnormalized
    float* part = acc + static_cast<std::size_t>(qn) * head_dim;  // this block's p · V
    float* rounded = part + static_cast<std::size_t>(qn) * head_dim;
    float *m = rounded + static_cast<std::size_t>(qn) * head_dim, *l = m + qn, *alpha = l + qn;
    std::uint32_t* low = native ? thread_scratch<std::uint32_t>(static_cast<std::size_t>(qn) * 2 * groups) : nullptr;
    std::uint32_t* low_p = low ? low + static_cast<std::size_t>(qn) * groups : nullptr;
    const float* queries = job.queries_of(bh, q0);
    round_queries(queries, job.stride, qn, head_dim, bf16, native, low, rounded);
    const float sink = job.sink_of(bh);
    std::fill(m, m + qn, job.abstains ? sink : -INFINITY);
    std::fill(l, l + qn, job.abstains ? 1.0f : 0.0f);
    std::fill(acc, acc + static_cast<std::size_t>(qn) * head_dim, 0.0f);
    const std::uint8_t* gone = job.evicted_of(bh);
    for (int k0 = 0, j = 0; k0 < tokens; k0 += kKeyBlock, ++j) {
        const int kn = std::min(kKeyBlock, tokens - k0);
        scores(queries, job.stride, qn, job.scratch, bh, native, low, bf16 && !native ? rounded : nullptr, head_dim, k0,
               kn, s, kKeyBlock);
        for (int i = 0; i < qn; ++i) {
            float* row = s + static_cast<std::size_t>(i) * kKeyBlock;
            if (gone)
                for (int k = 0; k < kn; ++k)
                    if (gone[k0 + k]) row[k] = -INFINITY;
            const float top = std::max(m[i], job.vec.row_max(row, static_cast<std::size_t>(kn)));
            if (top == -INFINITY) {  // softmax, every key so far evicted: nothing to add
                std::fill(row, row + kn, 0.0f);
                alpha[i] = 1.0f;
                continue;
            }
            alpha[i] = std::exp(m[i] - top);  // e^−∞ = 0 on the first key of softmax
            const float sum = job.vec.exp_sum(row, static_cast<std::size_t>(kn), top);
            if (gone)  // e^−∞ is flushed to e^−87.3 in exp_sum: make it exactly 0
                for (int k = 0; k < kn; ++k)
                    if (gone[k0 + k]) row[k] = 0.0f;
            l[i] = l[i] * alpha[i] + sum;
            m[i] = top;
        }
        mix(s, qn, kn, kKeyBlock, job.scratch, static_cast<std::size_t>(bh) * job.value_blocks + j, bf16, native, low_p,
            head_dim, part, head_dim);
        for (int i = 0; i < qn; ++i) {
            float* o = acc + static_cast<std::size_t>(i) * head_dim;
            const float* p = part + static_cast<std::size_t>(i) * head_dim;
            for (int d = 0; d < head_dim; ++d) o[d] = o[d] * alpha[i] + p[d];
        }
    }
    float* mixed = job.mixed_of(bh, q0);
    const AttentionRecord* record = job.record;
    for (int i = 0; i < qn; ++i) {
        const float inv = 1.0f / l[i];
        const float* o = acc + static_cast<std::size_t>(i) * head_dim;
        for (int d = 0; d < head_dim; ++d) mixed[static_cast<std::size_t>(i) * job.dim + d] = o[d] * inv;
        if (record && record->abstention)
            record->abstention[static_cast<std::size_t>(bh) * tokens + q0 + i] = job.abstains ? std::exp(sink - m[i]) * inv : 0.0f;
    }
}

// Query block qb of (sequence, head) bh over whole rows: its scores over every key at once,
// normalized in place (what the Probe's rows and key mass read, each query's probabilities
// added into `mass` where given), then P · V.
void attend_whole_rows(const AttentionJob& job, int bh, int qb, double* mass) {
    const int tokens = job.tokens, head_dim = job.head_dim;
    const bool native = job.native, bf16 = job.bf16;
    const AttentionRecord* record = job.record;
    const int q0 = qb * kQueryBlock, qn = std::min(kQueryBlock, tokens - q0);
    // The score block, then (emulated bf16) the rounded queries after it.
    float* s = thread_scratch<float>(static_cast<std::size_t>(qn) * (tokens + head_dim));
    float* rounded = s + static_cast<std::size_t>(qn) * tokens;
    std::uint32_t* low = native ? thread_scratch<std::uint32_t>(static_cast<std::size_t>(qn) *
                                                                std::max((head_dim + 1) / 2, (tokens + 1) / 2))
                                : nullptr;
    const float* queries = job.queries_of(bh, q0);
    round_queries(queries, job.stride, qn, head_dim, bf16, native, low, rounded);
    scores(queries, job.stride, qn, job.scratch, bh, native, low, bf16 && !native ? rounded : nullptr, head_dim, 0, tokens,
           s, tokens);
    const float sink = job.sink_of(bh);
    const std::uint8_t* gone = job.evicted_of(bh);
    for (int i = 0; i < qn; ++i) {
        float* row = s + static_cast<std::size_t>(i) * tokens;
        if (gone)
            for (int k = 0; k < tokens; ++k)
                if (gone[k]) row[k] = -INFINITY;
        const float null_mass = job.vec.normalize_attention(row, static_cast<std::size_t>(tokens), job.kind, sink);
        if (gone)  // e^−∞ is flushed to e^−87.3 in the normalizer: make it exactly 0
            for (int k = 0; k < tokens; ++k)
                if (gone[k]) row[k] = 0.0f;
        if (mass)
            for (int k = 0; k < tokens; ++k) mass[k] += row[k];
        if (!record) continue;
        if (record->abstention) record->abstention[static_cast<std::size_t>(bh) * tokens + q0 + i] = null_mass;
        const int slot = record->query_slot ? record->query_slot[q0 + i] : -1;
        if (slot >= 0 && record->rows)
            std::copy(row, row + tokens, record->rows + (static_cast<std::size_t>(bh) * record->slots + slot) * tokens);
    }
    mix(s, qn, tokens, tokens, job.scratch, static_cast<std::size_t>(bh), bf16, native, low, head_dim, job.mixed_of(bh, q0),
        job.dim);
}

}  // namespace

void attention(const float* qkv, int batch, int tokens, int heads, int head_dim, AttentionKind kind,
               const Eigen::VectorXf& sinks, float* out, AttentionScratch& scratch, bool bf16,
               const AttentionRecord* record, const std::uint8_t* evicted, AttentionPath path) {
    const int dim = heads * head_dim;
    const bool native = bf16 && gemm::native_bf16();
    const bool key_blocks = attention_by_key_blocks(tokens, record, path);
    const int value_blocks = key_blocks ? (tokens + kKeyBlock - 1) / kKeyBlock : 1;
    pack_keys_values(qkv, batch, tokens, heads, head_dim, bf16, native, key_blocks ? kKeyBlock : tokens, value_blocks,
                     scratch);
    const AttentionJob job{qkv,    tokens, heads,        head_dim, dim,    3 * dim, kind,    kind != AttentionKind::Softmax,
                           sinks,  out,    scratch,      bf16,     native, value_blocks, record, evicted, loops::active()};
    if (key_blocks) {
        const int blocks = (tokens + kKeyQueryBlock - 1) / kKeyQueryBlock;
        for_each_task(batch * heads * blocks, [&](int t) {
            const int bh = t / blocks, q0 = (t % blocks) * kKeyQueryBlock;
            attend_by_key_blocks(job, bh, q0, std::min(kKeyQueryBlock, tokens - q0));
        });
        return;
    }
    const int blocks = (tokens + kQueryBlock - 1) / kQueryBlock;
    if (record && record->key_mass) {
        // Key mass: one task per (sequence, head) runs its query blocks in order, adding each
        // query's probabilities into one row of N doubles (an order fixed by the sizes alone).
        for_each_task(batch * heads, [&](int bh) {
            double* mass = thread_scratch<double>(static_cast<std::size_t>(tokens));
            std::fill(mass, mass + tokens, 0.0);
            for (int qb = 0; qb < blocks; ++qb) attend_whole_rows(job, bh, qb, mass);
            for (int k = 0; k < tokens; ++k)
                record->key_mass[static_cast<std::size_t>(bh) * tokens + k] = static_cast<float>(mass[k] / tokens);
        });
    } else {
        for_each_task(batch * heads * blocks, [&](int t) { attend_whole_rows(job, t / blocks, t % blocks, nullptr); });
    }
}

TokenMoments token_moments(const float* x, int rows, int width) {
    TokenMoments m;
    m.l2.resize(rows);
    m.max_abs.resize(rows);
    m.sums.resize(static_cast<std::size_t>(rows) * 4);
    for_each_task((rows + kRowsPerTask - 1) / kRowsPerTask, [&](int t) {
        for (int r = t * kRowsPerTask, end = std::min(rows, r + kRowsPerTask); r < end; ++r) {
            const float* v = x + static_cast<std::size_t>(r) * width;
            double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
            float mx = 0;
            for (int c = 0; c < width; ++c) {
                const double d = v[c], d2 = d * d;
                s1 += d;
                s2 += d2;
                s3 += d2 * d;
                s4 += d2 * d2;
                mx = std::max(mx, std::fabs(v[c]));
            }
            m.l2[r] = static_cast<float>(std::sqrt(s2));
            m.max_abs[r] = mx;
            double* out = m.sums.data() + static_cast<std::size_t>(r) * 4;
            out[0] = s1;
            out[1] = s2;
            out[2] = s3;
            out[3] = s4;
        }
    });
    return m;
}

}  // namespace vitreg::kernels
