#include "kernels.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <cmath>

#include "vector_loops.hpp"
#include "core/attention.hpp"

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
constexpr int kQueryBlock = 64;
constexpr int kRowsPerTask = 64;  // LayerNorm and SwiGLU rows per task

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
// holds it.
template <class T>
T* thread_scratch(std::size_t n) {
    static thread_local std::vector<T, gemm::AlignedAllocator<T>> scratch;
    return gemm::at_least(scratch, n);
}

}  // namespace

Linear make_linear(const float* w, int out, int in, Eigen::VectorXf bias, Precision precision,
                   std::optional<quant::AffineU8> fixed, int int8_weight_bits) {
    Linear l;
    l.precision = precision;
    l.in_ = in;
    l.out_ = out;
    l.bias = std::move(bias);
    const RowMatrix wt = Eigen::Map<const RowMatrix>(w, out, in).transpose();
    switch (precision) {
        case Precision::Fp32: l.wt = gemm::pack(wt.data(), in, out, out); break;
        case Precision::Bf16:
            if (gemm::native_bf16()) gemm::pack_into(l.wb, wt.data(), in, out, out);
            else gemm::pack_into(l.wt, wt.data(), in, out, out, gemm::best(), true);
            break;
        case Precision::Int8:
            l.wq = gemm::pack_int8(wt.data(), in, out, out, gemm::int8_kernel(int8_weight_bits), int8_weight_bits);
            l.fixed = fixed;
            break;
    }
    return l;
}

void linear(const float* x, int rows, const Linear& layer, float* out, Epilogue epilogue, LinearScratch& scratch,
            const Eigen::VectorXf* scale) {
    const int in = layer.in(), width = layer.out();
    // bf16 without vdpbf16ps: rounded operands through the fp32 kernel.
    const bool rounded = layer.precision == Precision::Bf16 && !gemm::native_bf16();
    const Precision precision = rounded ? Precision::Fp32 : layer.precision;
    const int nr = precision == Precision::Fp32 ? layer.wt.nr : precision == Precision::Bf16 ? layer.wb.nr : layer.wq.nr;
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
    float* row_scale = precision == Precision::Int8 ? gemm::at_least(scratch.scale, n) : nullptr;
    std::int32_t* row_zero = precision == Precision::Int8 ? gemm::at_least(scratch.zero_point, n) : nullptr;
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
            else if (precision == Precision::Int8)
                gemm::quantize_rows(src, in, rn, in, layer.fixed ? &*layer.fixed : nullptr,
                                    low + static_cast<std::size_t>(r0) * groups, row_scale + r0, row_zero + r0);
        });
    if (rounded_x) x = rounded_x;
    // Column tiles are whole kernel panels (side / nr of them); row tiles `side` rows.
    const int panel_count = (width + nr - 1) / nr;
    const int panels_per_tile = std::max(1, side / nr);
    const int col_tiles = (panel_count + panels_per_tile - 1) / panels_per_tile;
    const gemm::Epilogue fused{layer.bias.data(), epilogue == Epilogue::ScaledResidual ? scale->data() : nullptr};
    // Tasks in the order that re-reads the smaller operand: when the weights outweigh the input
    // (few rows: batch 1), each column tile of B serves every row tile while it is in L2, and A
    // is the one read again; else each row tile of A serves every column tile. On this Xeon,
    // ViT-B/14 at batch 1 and 1 thread: B had been read from L3 once per row tile.
    const bool column_major = static_cast<long>(rows) < static_cast<long>(width);
    for_each_task(row_tiles * col_tiles, [&](int t) {
        const int rt = column_major ? t % row_tiles : t / col_tiles, ct = column_major ? t / row_tiles : t % col_tiles;
        const int r0 = rt * side, rn = std::min(side, rows - r0);
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
        }
        if (epilogue == Epilogue::BiasGelu) vec.gelu(tile, rn, cn, width);
        else if (epilogue == Epilogue::BiasQuickGelu) vec.quick_gelu(tile, rn, cn, width);
        else if (epilogue == Epilogue::BiasGeluTanh) vec.gelu_tanh(tile, rn, cn, width);
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

void attention(const float* qkv, int batch, int tokens, int heads, int head_dim, AttentionKind kind,
               const Eigen::VectorXf& sinks, float* out, AttentionScratch& scratch, bool bf16,
               const AttentionRecord* record, const std::uint8_t* evicted) {
    const int dim = heads * head_dim, stride = 3 * dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    // Keys (as scale·Kᵀ, so queries are read in place) and values packed once per
    // (sequence, head), shared by its query blocks.
    // bf16 runs on vdpbf16ps where the CPU has it; elsewhere its bf16-rounded operands go
    // through the fp32 kernels (exact products, fp32 sums: the same up to summation order),
    // which is faster than replaying vdpbf16ps lane by lane.
    const bool native = bf16 && gemm::native_bf16();
    const std::size_t pairs = static_cast<std::size_t>(batch) * heads;
    for (auto* v : {&scratch.keys, &scratch.values})
        if (!native && v->size() < pairs) v->resize(pairs);
    for (auto* v : {&scratch.keys_bf16, &scratch.values_bf16})
        if (native && v->size() < pairs) v->resize(pairs);
    for_each_task(batch * heads, [&](int bh) {
        const float* seq = qkv + static_cast<std::size_t>(bh / heads) * tokens * stride + (bh % heads) * head_dim;
        if (native) {
            gemm::pack_transposed_into(scratch.keys_bf16[bh], seq + dim, tokens, head_dim, stride, scale);
            gemm::pack_into(scratch.values_bf16[bh], seq + 2 * dim, tokens, head_dim, stride);
        } else {
            gemm::pack_transposed_into(scratch.keys[bh], seq + dim, tokens, head_dim, stride, scale, gemm::best(), bf16);
            gemm::pack_into(scratch.values[bh], seq + 2 * dim, tokens, head_dim, stride, gemm::best(), bf16);
        }
    });
    const int blocks = (tokens + kQueryBlock - 1) / kQueryBlock;
    const loops::Table& vec = loops::active();
    // Column sums per query block, added up in block order afterwards (deterministic).
    std::vector<double> block_mass(record && record->key_mass ? static_cast<std::size_t>(batch) * heads * blocks * tokens : 0);
    for_each_task(batch * heads * blocks, [&](int t) {
        const int bh = t / blocks, h = bh % heads, b = bh / heads, qb = t % blocks;
        const int q0 = qb * kQueryBlock, qn = std::min(kQueryBlock, tokens - q0);
        // The score block, then (emulated bf16) the rounded queries after it.
        float* s = thread_scratch<float>(static_cast<std::size_t>(qn) * (tokens + head_dim));
        const float* queries = qkv + (static_cast<std::size_t>(b) * tokens + q0) * stride + h * head_dim;
        std::uint32_t* low =
            native ? thread_scratch<std::uint32_t>(static_cast<std::size_t>(qn) * std::max((head_dim + 1) / 2, (tokens + 1) / 2)) : nullptr;
        if (native) {
            gemm::round_rows_bf16(queries, stride, qn, head_dim, low);
            gemm::multiply(low, qn, scratch.keys_bf16[bh], 0, tokens, s, tokens);
        } else if (bf16) {
            float* rounded = s + static_cast<std::size_t>(qn) * tokens;
            for (int i = 0; i < qn; ++i)
                vec.round_bf16(queries + static_cast<std::size_t>(i) * stride, head_dim, rounded + i * head_dim);
            gemm::multiply(rounded, head_dim, qn, scratch.keys[bh], 0, tokens, s, tokens);
        } else {
            gemm::multiply(queries, stride, qn, scratch.keys[bh], 0, tokens, s, tokens);
        }
        const float sink = kind == AttentionKind::Sink ? sinks[h] : 0.0f;
        const std::uint8_t* gone = evicted ? evicted + static_cast<std::size_t>(bh) * tokens : nullptr;
        for (int i = 0; i < qn; ++i) {
            float* row = s + static_cast<std::size_t>(i) * tokens;
            if (gone)
                for (int k = 0; k < tokens; ++k)
                    if (gone[k]) row[k] = -INFINITY;
            const float null_mass = vec.normalize_attention(row, static_cast<std::size_t>(tokens), kind, sink);
            if (gone)  // e^−∞ is flushed to e^−87.3 in the normalizer: make it exactly 0
                for (int k = 0; k < tokens; ++k)
                    if (gone[k]) row[k] = 0.0f;
            if (!record) continue;
            if (record->abstention) record->abstention[static_cast<std::size_t>(bh) * tokens + q0 + i] = null_mass;
            const int slot = record->query_slot ? record->query_slot[q0 + i] : -1;
            if (slot >= 0 && record->rows)
                std::copy(row, row + tokens, record->rows + (static_cast<std::size_t>(bh) * record->slots + slot) * tokens);
        }
        if (!block_mass.empty()) {
            double* mass = block_mass.data() + (static_cast<std::size_t>(bh) * blocks + qb) * tokens;
            for (int i = 0; i < qn; ++i)
                for (int k = 0; k < tokens; ++k) mass[k] += s[static_cast<std::size_t>(i) * tokens + k];
        }
        float* mixed = out + (static_cast<std::size_t>(b) * tokens + q0) * dim + h * head_dim;
        if (native) {
            gemm::round_rows_bf16(s, tokens, qn, tokens, low);
            gemm::multiply(low, qn, scratch.values_bf16[bh], 0, head_dim, mixed, dim);
        } else {
            if (bf16) vec.round_bf16(s, static_cast<std::size_t>(qn) * tokens, s);
            gemm::multiply(s, tokens, qn, scratch.values[bh], 0, head_dim, mixed, dim);
        }
    });
    if (!block_mass.empty())
        for (int bh = 0; bh < batch * heads; ++bh)
            for (int k = 0; k < tokens; ++k) {
                double sum = 0;
                for (int qb = 0; qb < blocks; ++qb) sum += block_mass[(static_cast<std::size_t>(bh) * blocks + qb) * tokens + k];
                record->key_mass[static_cast<std::size_t>(bh) * tokens + k] = static_cast<float>(sum / tokens);
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
