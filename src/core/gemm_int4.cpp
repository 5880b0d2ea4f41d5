// int4 weights (W4A8): the packer and the group-wise GEMM over the int8 tiles (gemm_lowp.hpp).
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <string>

#include "cpu.hpp"
#include "gemm_lowp.hpp"
#include "vector_loops.hpp"
#include "vitreg/error.hpp"

#include "parallel_each.hpp"

namespace vitreg::gemm {

namespace {
constexpr int kGroupQuads = quant::kInt4Group / 4;  // a group's 32-bit words along k

// Value i of bf16 values as a file stores them (2 bytes each, any alignment).
float widen(const unsigned char* bf16, long i) {
    std::uint16_t v;
    std::memcpy(&v, bf16 + 2 * i, 2);
    return quant::from_bf16(v);
}

#if defined(__x86_64__)
// The groups run in one assembly loop (gemm_k_loops.inc) for weights packed and in place, with
// the int8 tiles' k step. Compiled from intrinsics, the two had been two kernels in which GCC 12
// copied the accumulators between registers at every step.
#include "gemm_k_loops.inc"

// Where a tile's group parameters lie, 4 bytes each, group g's at g · stride from the first.
// Packed weights (B's columns, Int8Dot): the weights' scale and zero per column (the panel's
// [group][16·NV] floats, unpack_panel), the tokens' Σ (u − zp) per row as floats (strip_terms:
// [group][kStrip] per strip of rows, gathered once a call). Weights in place (A's rows,
// Int8DotSigned): scale and zero per row ([group][rows] floats, widened from the file's bf16
// once a call), the tokens' terms per column (int32 [group][16·NV], gathered once a panel).
struct GroupScales {
    const float* scale;
    const void* per_column;
    const float* per_row;
    long row_stride;  // floats from one group's per-row operands to the next's
};

// MR rows × 16·NV columns of Σ_g scale_g · Σ u·(q − 8) + zero_g · Σ (u − zp) into `out`: every
// group in the assembly loop, the tail group (k not a multiple of the group) in a second call.
template <int MR, int NV, Mac OP>
void int4_tile(const std::uint32_t* a, long lda, const std::uint32_t* b, int groups, const GroupScales& s, float* out,
               Prefetch& next) {
    constexpr int W = 16 * NV;
    constexpr bool on_columns = OP == Mac::Int8Dot;
    const int full = groups / kGroupQuads, tail = groups % kGroupQuads;
    if (full)
        avx512_int4_groups<MR, NV, OP, true>(a, lda, b, full, kGroupQuads, s.scale, s.per_column, s.per_row,
                                             4 * s.row_stride, out, next.at, next.lines);
    if (tail) {
        const long q0 = static_cast<long>(full) * kGroupQuads;
        const auto last = full ? avx512_int4_groups<MR, NV, OP, false> : avx512_int4_groups<MR, NV, OP, true>;
        last(a + q0, lda, b + q0 * W, 1, tail, s.scale + full * (on_columns ? W : s.row_stride),
             static_cast<const float*>(s.per_column) + full * W, s.per_row + full * s.row_stride, 4 * s.row_stride, out,
             next.at, next.lines);
    }
}

// int4_tile for `rows` rows, R ≤ rows ≤ MR.
template <int R, int MR, int NV, Mac OP>
void int4_rows(int rows, const std::uint32_t* a, long lda, const std::uint32_t* b, int groups, const GroupScales& s,
               float* out, Prefetch& next) {
    if constexpr (R < MR) {
        if (rows != R) return int4_rows<R + 1, MR, NV, OP>(rows, a, lda, b, groups, s, out, next);
    }
    int4_tile<R, NV, OP>(a, lda, b, groups, s, out, next);
}
#endif
}  // namespace

Int8Isa int4_kernel() {
    const Int8Isa isa = int8_kernel(7);
    return isa == Int8Isa::Amx ? Int8Isa::Avx512Vnni : isa;
}

PackedInt4 pack_int4(const float* b, int k, int n, long ldb, Int8Isa isa) {
    const quant::Int4Weights w = quant::quantize_groups(b, n, k, 1, ldb);
    return pack_int4(w.codes.data(), w.scale.data(), w.zero.data(), k, n, isa);
}

namespace {
// One panel of p.data: four codes of a column per 16-bit word, 8 (zero) past k.
template <class CodeAt>
void pack_int4_panel(PackedInt4& p, const CodeAt& code_at, int panel) {
    std::uint16_t* dst = p.data.data() + static_cast<std::size_t>(panel) * p.groups() * p.nr;
    const int j0 = panel * p.nr, jn = std::min(p.nr, p.n - j0);
    for (int g = 0; g < p.groups(); ++g)
        for (int j = 0; j < jn; ++j) {
            std::uint16_t word = 0;
            for (int i = 0; i < 4; ++i) {
                const int row = 4 * g + i;
                const std::uint16_t code = row < p.k ? code_at(row, j0 + j) : 8;
                word = static_cast<std::uint16_t>(word | (code << (4 * i)));
            }
            dst[static_cast<std::size_t>(g) * p.nr + j] = word;
        }
}
}  // namespace

PackedInt4 pack_int4(const std::uint8_t* codes, const std::uint16_t* scale, const std::uint16_t* zero, int k, int n,
                     Int8Isa isa) {
    PackedInt4 p;
    p.k = k;
    p.n = n;
    p.isa = isa == Int8Isa::Amx || !supported(isa) ? int4_kernel() : isa;
    p.nr = detail::int8_tiles(p.isa).nr;
    const std::size_t params = static_cast<std::size_t>(p.blocks()) * n;
    p.scale.assign(params, 0);
    p.zero.assign(params, 0);
    p.sums.assign(params, 0);
    const int row_bytes = quant::int4_row_bytes(k);
    const auto code_at = [&](int row, int col) { return quant::int4_code(codes + static_cast<std::size_t>(col) * row_bytes, row); };
    parallel_each(n, [&](int col) {  // [n][blocks] as stored, [blocks][n] as the GEMM reads them
        for (int g = 0; g < p.blocks(); ++g) {
            const std::size_t at = static_cast<std::size_t>(g) * n + col, stored = static_cast<std::size_t>(col) * p.blocks() + g;
            p.scale[at] = scale[stored];
            p.zero[at] = zero[stored];
            int sum = 0;
            for (int row = g * quant::kInt4Group; row < std::min(k, (g + 1) * quant::kInt4Group); ++row)
                sum += code_at(row, col) - 8;
            p.sums[at] = static_cast<std::int16_t>(sum);
        }
    });
    p.data.assign(static_cast<std::size_t>(p.panels()) * p.groups() * p.nr, 0x8888u);
    parallel_each(p.panels(), [&](int panel) { pack_int4_panel(p, code_at, panel); });
    return p;
}

std::vector<float> dequantize(const PackedInt4& b) {
    std::vector<float> w(static_cast<std::size_t>(b.k) * b.n);
    for (int row = 0; row < b.k; ++row)
        for (int col = 0; col < b.n; ++col) {
            const std::size_t at = static_cast<std::size_t>(row / quant::kInt4Group) * b.n + col;
            const quant::AffineU4 a{quant::from_bf16(b.scale[at]), quant::from_bf16(b.zero[at])};
            const std::uint16_t word = b.data[(static_cast<std::size_t>(col / b.nr) * b.groups() + row / 4) * b.nr + col % b.nr];
            w[static_cast<std::size_t>(row) * b.n + col] = quant::dequantize_u4(static_cast<std::uint8_t>((word >> (4 * (row % 4))) & 0xf), a);
        }
    return w;
}

namespace {

// One column panel's weights as the int8 tiles read them, and its groups' parameters as floats
// and ints over the panel's nr columns (zero past n): unpacked once, for every row of A.
struct Int4Panel {
    GroupBuffer codes;
    std::vector<float> scale, zero;  // [blocks][nr]
    std::vector<float> scaled_sums;  // [nr] Σ_g scale_g · Σ (q − 8), the zero point's term
};

void unpack_panel(const PackedInt4& b, int panel, const loops::Table& vec, Int4Panel& out) {
    const std::size_t words = static_cast<std::size_t>(b.groups()) * b.nr;
    vec.unpack_int4(b.data.data() + panel * words, words, at_least(out.codes, words));
    const std::size_t params = static_cast<std::size_t>(b.blocks()) * b.nr;
    out.scale.assign(params, 0.0f);
    out.zero.assign(params, 0.0f);
    out.scaled_sums.assign(b.nr, 0.0f);
    const int j0 = panel * b.nr, jn = std::min(b.nr, b.n - j0);
    for (int g = 0; g < b.blocks(); ++g)
        for (int j = 0; j < jn; ++j) {
            const std::size_t from = static_cast<std::size_t>(g) * b.n + j0 + j, to = static_cast<std::size_t>(g) * b.nr + j;
            out.scale[to] = quant::from_bf16(b.scale[from]);
            out.zero[to] = quant::from_bf16(b.zero[from]);
            out.scaled_sums[j] += out.scale[to] * static_cast<float>(b.sums[from]);
        }
}

#if defined(__x86_64__)
constexpr int kStrip = 4;  // rows of tokens per packed tile (12 accumulators and their 12 sums)

// Rows r .. r + rows (at most kStrip) of the tokens against one panel of packed weights, their
// terms as floats [group][kStrip] (strip_terms).
void vnni_tile(int rows, const std::uint32_t* a, long lda, const Int4Panel& p, int groups, const float* terms,
               float* out) {
    const GroupScales s{p.scale.data(), p.zero.data(), terms, kStrip};
    Prefetch none;
    int4_rows<1, kStrip, 3, Mac::Int8Dot>(rows, a, lda, p.codes.data(), groups, s, out, none);
}

// The tokens' terms [m][blocks] as floats [m / kStrip][blocks][kStrip], the layout the packed
// tiles broadcast from: gathered once a call rather than once a panel.
const float* strip_terms(const std::int32_t* terms, int m, int blocks) {
    static thread_local std::vector<float, AlignedAllocator<float>> strips;
    const int count = (m + kStrip - 1) / kStrip;
    float* out = at_least(strips, static_cast<std::size_t>(count) * blocks * kStrip);
    for (int strip = 0; strip < count; ++strip)
        for (int g = 0; g < blocks; ++g)
            for (int i = 0; i < kStrip; ++i) {
                const int r = strip * kStrip + i;
                out[(static_cast<std::size_t>(strip) * blocks + g) * kStrip + i] =
                    r < m ? static_cast<float>(terms[static_cast<std::size_t>(r) * blocks + g]) : 0.0f;
            }
    return out;
}
#endif

}  // namespace

namespace {

// One row's Σ_g scale_g · Σ (q − 8) over its groups, in group order (the packed path's sum,
// unpack_panel's order): one group's codes at a time, both nibbles summed.
float scaled_sum_portable(const std::uint8_t* codes, int blocks, const unsigned char* scale) {
    constexpr int bytes = quant::kInt4Group / 2;
    float total = 0.0f;
    for (int g = 0; g < blocks; ++g) {
        const std::uint8_t* group = codes + static_cast<std::size_t>(g) * bytes;
        std::int32_t sum = 0;
        for (int i = 0; i < bytes; ++i) sum += (group[i] & 0xf) + (group[i] >> 4) - 16;
        total += widen(scale, g) * static_cast<float>(sum);
    }
    return total;
}

#if defined(__x86_64__)
// The same, each group's 64 bytes summed through vpsadbw and reduced in registers: the integer
// sums are exact, and the float sum runs in the same order, so the bits are the portable one's.
__attribute__((target("avx512f,avx512bw"))) float scaled_sum_avx512(const std::uint8_t* codes, int blocks,
                                                                      const unsigned char* scale) {
    constexpr int bytes = quant::kInt4Group / 2;
    const __m512i low = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
    float total = 0.0f;
    for (int g = 0; g < blocks; ++g) {
        const __m512i v = _mm512_loadu_si512(codes + static_cast<std::size_t>(g) * bytes);
        const __m512i sums = _mm512_add_epi64(_mm512_sad_epu8(_mm512_and_si512(v, low), zero),
                                              _mm512_sad_epu8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low), zero));
        const auto sum = static_cast<std::int32_t>(_mm512_reduce_add_epi64(sums)) - 8 * quant::kInt4Group;
        total += widen(scale, g) * static_cast<float>(sum);
    }
    return total;
}
#endif
}  // namespace

void int4_scaled_sums(const std::uint8_t* codes, int n, int k, const unsigned char* scale, float* out) {
    if (k % quant::kInt4Group) throw Error("int4 group sums: k is not a multiple of the group");
    const int blocks = k / quant::kInt4Group;
    auto row_sum = scaled_sum_portable;
#if defined(__x86_64__)
    if (cpu::usable().avx512) row_sum = scaled_sum_avx512;
#endif
    for (int row = 0; row < n; ++row)
        out[row] = row_sum(codes + static_cast<std::size_t>(row) * (k / 2), blocks, scale + 2 * static_cast<std::size_t>(row) * blocks);
}

namespace {
#if defined(__x86_64__)
// One panel 16·NV wide: W's rows MR at a time (fewer for the last), into f's first `cols` columns;
// scale and zero [blocks][on].
template <int MR, int NV>
void panel_in_place(const std::uint32_t* w, long lda, int on, const std::uint32_t* panel, int blocks, const float* scale,
                    const float* zero, const std::int32_t* terms, long term_stride, int cols, float* f, long ldf,
                    Prefetch& next) {
    constexpr int W = 16 * NV;
    alignas(64) float tile[MR * W];
    static thread_local std::vector<std::int32_t, AlignedAllocator<std::int32_t>> gathered;
    std::int32_t* panel_terms = at_least(gathered, static_cast<std::size_t>(blocks) * W);  // [group][W]
    for (int g = 0; g < blocks; ++g) std::memcpy(panel_terms + g * W, terms + g * term_stride, W * sizeof(std::int32_t));
    for (int r = 0; r < on; r += MR) {
        const int rows = std::min(MR, on - r);
        const GroupScales s{scale + r, panel_terms, zero + r, on};
        int4_rows<1, MR, NV, Mac::Int8DotSigned>(rows, w + r * lda, lda, panel, blocks * kGroupQuads, s, +tile, next);
        for (int i = 0; i < rows; ++i) std::memcpy(f + (r + i) * ldf, tile + i * W, static_cast<std::size_t>(cols) * 4);
    }
}
#endif
}  // namespace

void multiply_rows_int4(const std::uint32_t* w, int on, const PackedRows& x, int c0, int c1, const unsigned char* scale,
                        const unsigned char* zero, const std::int32_t* terms, long term_stride, float* f, long ldf,
                        Prefetch next) {
#if defined(__x86_64__)
    const int blocks = x.groups / kGroupQuads;
    // The rows' bf16 scales and zeros as floats [blocks][on], once for every panel.
    static thread_local std::vector<float, AlignedAllocator<float>> widened;
    float* scale_f = at_least(widened, 2 * static_cast<std::size_t>(blocks) * on);
    float* zero_f = scale_f + static_cast<std::size_t>(blocks) * on;
    for (int row = 0; row < on; ++row)
        for (int g = 0; g < blocks; ++g) {
            scale_f[static_cast<std::size_t>(g) * on + row] = widen(scale, static_cast<long>(row) * blocks + g);
            zero_f[static_cast<std::size_t>(g) * on + row] = widen(zero, static_cast<long>(row) * blocks + g);
        }
    for (int col = c0; col < c1;) {
        const int panel = col / x.nr, width = x.width(panel), cols = std::min(width, c1 - col);
        const std::uint32_t* p = x.data.data() + x.offset(panel);
        const std::int32_t* t = terms + col;
        float* out = f + (col - c0);
        switch (width) {
            case 16: panel_in_place<8, 1>(w, x.groups, on, p, blocks, scale_f, zero_f, t, term_stride, cols, out, ldf, next); break;
            case 32: panel_in_place<6, 2>(w, x.groups, on, p, blocks, scale_f, zero_f, t, term_stride, cols, out, ldf, next); break;
            case 64: panel_in_place<3, 4>(w, x.groups, on, p, blocks, scale_f, zero_f, t, term_stride, cols, out, ldf, next); break;
            default: panel_in_place<4, 3>(w, x.groups, on, p, blocks, scale_f, zero_f, t, term_stride, cols, out, ldf, next); break;
        }
        col += width;
    }
#else
    (void)w, (void)on, (void)x, (void)c0, (void)c1, (void)scale, (void)zero, (void)terms, (void)term_stride, (void)f, (void)ldf,
        (void)next;
    throw Error("int4 weights in place need AVX512-VNNI");
#endif
}

void int4_row_terms(const QuantizedRows& a, int m, int k, std::int32_t* out) {
    const int groups = (k + 3) / 4, blocks = (k + quant::kInt4Group - 1) / quant::kInt4Group;
    for (int r = 0; r < m; ++r) {
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(a.data + static_cast<std::size_t>(r) * groups);
        for (int g = 0; g < blocks; ++g) {
            const int k0 = g * quant::kInt4Group, k1 = std::min(k, k0 + quant::kInt4Group);
            const int n = k1 - k0;
            out[static_cast<std::size_t>(r) * blocks + g] = sum_u8(bytes + k0, static_cast<std::size_t>(n)) - a.zero_point[r] * n;
        }
    }
}

void multiply(const QuantizedRows& a, int m, const PackedInt4& b, int c0, int c1, float* c, long ldc,
              const Epilogue& e) {
    const loops::Table& vec = loops::active();
    const detail::LowpTiles t = detail::int8_tiles(b.isa);
    if (t.nr != b.nr) throw Error("int4 weights packed for another kernel");
    static thread_local Int4Panel panel;
    const int groups = b.groups(), blocks = b.blocks();
    alignas(64) std::int32_t acc[detail::kMaxLowpTile];
    alignas(64) float f[detail::kMaxLowpTile];
#if defined(__x86_64__)
    const bool vnni = b.isa == Int8Isa::Avx512Vnni && b.nr == 48;
    const float* strips = vnni ? strip_terms(a.group_terms, m, blocks) : nullptr;
#else
    const bool vnni = false;
#endif
    const int mr = vnni ? kStrip : t.mr;
    for (int col = c0; col < c1; col += b.nr) {
        unpack_panel(b, col / b.nr, vec, panel);
        const int cols = std::min(b.nr, c1 - col);
        for (int r = 0; r < m; r += mr) {
            const int rows = std::min(mr, m - r);
            const std::uint32_t* ar = a.data + static_cast<std::size_t>(r) * groups;
            const std::int32_t* terms = a.group_terms + static_cast<std::size_t>(r) * blocks;
#if defined(__x86_64__)
            if (vnni) vnni_tile(rows, ar, groups, panel, groups, strips + static_cast<std::size_t>(r) * blocks, f);
#endif
            if (!vnni) {
                std::fill(f, f + rows * b.nr, 0.0f);
                for (int g = 0; g < blocks; ++g) {
                    const int q0 = g * kGroupQuads, qn = std::min(kGroupQuads, groups - q0);
                    t.tiles[rows - 1](ar + q0, groups, panel.codes.data() + static_cast<std::size_t>(q0) * b.nr, qn, acc);
                    const std::size_t at = static_cast<std::size_t>(g) * b.nr;
                    vec.int4_accumulate(acc, b.nr, rows, b.nr, panel.scale.data() + at, panel.zero.data() + at, terms + g,
                                        blocks, f);
                }
            }
            vec.int4_finish(f, b.nr, rows, cols, a.zero_point + r, panel.scaled_sums.data(), a.scale + r,
                            e.bias ? e.bias + col : nullptr, e.scale ? e.scale + col : nullptr, c + r * ldc + (col - c0), ldc);
        }
    }
}

}  // namespace vitreg::gemm
