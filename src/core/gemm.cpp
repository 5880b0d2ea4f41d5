#include "gemm.hpp"

#include "cpu.hpp"
#include "quantize.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

namespace vitreg::gemm {

namespace {

// What a kernel does besides its product: the tile's width, its epilogue, and `fetch_lines`
// cache lines from `fetch` to bring into L2 on the way, up to one per two steps of k (AVX2: four).
// run_tiles points them at the next panel, which would otherwise come from L3 on its first strip.
struct TileJob {
    int cols;
    const float* bias;
    const float* scale;
    const char* fetch = nullptr;
    int fetch_lines = 0;
};

// ---- AVX-512: MR rows × 16·NV columns, MR·NV accumulators --------------------------------
// Two shapes, 8×48 and 6×64 (24 accumulators each), A read in place (12×32 had needed A packed
// to keep up). Each matrix is packed for the one that pads it least (48 for 1152, 64 for a
// 64-wide head).
#if defined(__x86_64__)
#include "gemm_k_loops.inc"

template <int MR, int NV>
__attribute__((target("avx512f"))) void kernel_avx512(const float* a, long lda, const float* bp, int k, float* c,
                                                      long ldc, const TileJob& t) {
    // Fetch C's lines now, so that the stores at the end do not wait for them from memory.
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) __builtin_prefetch(c + r * ldc + 16 * v, 1, 3);
    alignas(64) float acc[MR * NV * 16];
    avx512_product<MR, NV>(a, lda, bp, k, t.fetch, t.fetch_lines, acc);
    const int cols = t.cols;
    const float *bias = t.bias, *scale = t.scale;
    for (int v = 0; v < NV && 16 * v < cols; ++v) {
        const int left = cols - 16 * v;
        const __mmask16 m = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
        const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + 16 * v) : _mm512_setzero_ps();
        const __m512 sv = scale ? _mm512_maskz_loadu_ps(m, scale + 16 * v) : _mm512_setzero_ps();
        for (int r = 0; r < MR; ++r) {
            float* out = c + r * ldc + 16 * v;
            const __m512 sum = _mm512_load_ps(acc + (r * NV + v) * 16);
            __m512 y = bias ? _mm512_add_ps(sum, bv) : sum;
            if (scale) y = _mm512_fmadd_ps(sv, y, _mm512_maskz_loadu_ps(m, out));
            _mm512_mask_storeu_ps(out, m, y);
        }
    }
}

// ---- AVX2 + FMA: 6 rows × 16 columns, 12 accumulators ------------------------------------
// PACKED: A is one strip of [k][MR] (pack_rows), one stream instead of MR rows: 6% faster on
// a Xeon (2088 × 384 · 384 × 1152, 124 against 117 GFLOP/s); lda is then unused.
template <int MR, bool PACKED>
__attribute__((target("avx2,fma"))) void kernel_avx2(const float* a, long lda, const float* bp, int k, float* c,
                                                     long ldc, const TileJob& t) {
    for (int r = 0; r < MR; ++r) __builtin_prefetch(c + r * ldc, 1, 3);
    alignas(32) float acc[MR * 16];
    avx2_product<MR, PACKED>(a, lda, bp, k, t.fetch, t.fetch_lines, acc);
    const int cols = t.cols;
    const float *bias = t.bias, *scale = t.scale;
    // The epilogue, on the finished tile; a partial tile goes through a lane mask.
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int v = 0; v < 2 && 8 * v < cols; ++v) {
        const int left = cols - 8 * v;
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);
        const bool full = left >= 8;
        const __m256 bv = bias ? (full ? _mm256_loadu_ps(bias + 8 * v) : _mm256_maskload_ps(bias + 8 * v, m))
                               : _mm256_setzero_ps();
        const __m256 sv = scale ? (full ? _mm256_loadu_ps(scale + 8 * v) : _mm256_maskload_ps(scale + 8 * v, m))
                                : _mm256_setzero_ps();
        for (int r = 0; r < MR; ++r) {
            float* out = c + r * ldc + 8 * v;
            const __m256 sum = _mm256_load_ps(acc + (r * 2 + v) * 8);
            __m256 y = bias ? _mm256_add_ps(sum, bv) : sum;
            if (scale) y = _mm256_fmadd_ps(sv, y, full ? _mm256_loadu_ps(out) : _mm256_maskload_ps(out, m));
            if (full) _mm256_storeu_ps(out, y);
            else _mm256_maskstore_ps(out, m, y);
        }
    }
}
#endif

// ---- Portable: 4 rows × 16 columns ------------------------------------------------------
template <int MR>
void kernel_portable(const float* a, long lda, const float* bp, int k, float* c, long ldc, const TileJob& t) {
    float acc[MR][16] = {};
    for (int p = 0; p < k; ++p)
        for (int r = 0; r < MR; ++r) {
            const float av = a[r * lda + p];
            for (int j = 0; j < 16; ++j) acc[r][j] += av * bp[p * 16 + j];
        }
    for (int r = 0; r < MR; ++r) finish_row(acc[r], t.cols, t.bias, t.scale, c + r * ldc);
}

using Kernel = void (*)(const float*, long, const float*, int, float*, long, const TileJob&);

// Table entry i handles i+1 rows (the full strip, then the remainder); pick(MR) names the
// kernel for MR rows, MR arriving as a std::integral_constant.
template <int Rows, class Pick, std::size_t... I>
constexpr std::array<Kernel, Rows> table(Pick pick, std::index_sequence<I...>) {
    return {pick(std::integral_constant<int, static_cast<int>(I) + 1>())...};
}
template <int Rows, class Pick>
constexpr std::array<Kernel, Rows> table(Pick pick) {
    return table<Rows>(pick, std::make_index_sequence<Rows>());
}
#if defined(__x86_64__)
constexpr auto kAvx512x48 = table<8>([](auto mr) -> Kernel { return kernel_avx512<decltype(mr)::value, 3>; });
constexpr auto kAvx512x64 = table<6>([](auto mr) -> Kernel { return kernel_avx512<decltype(mr)::value, 4>; });
constexpr auto kAvx2 = table<6>([](auto mr) -> Kernel { return kernel_avx2<decltype(mr)::value, false>; });
constexpr auto kAvx2Packed = table<6>([](auto mr) -> Kernel { return kernel_avx2<decltype(mr)::value, true>; });
#endif
constexpr auto kPortable = table<4>([](auto mr) -> Kernel { return kernel_portable<decltype(mr)::value>; });

struct Plan {
    const Kernel* kernels;
    int mr, nr;
    const Kernel* packed = nullptr;  // the kernels for A packed by pack_rows, where they are faster
};

Plan plan(Isa isa, int nr) {
    switch (isa) {
#if defined(__x86_64__)
        case Isa::Avx512: return nr == 64 ? Plan{kAvx512x64.data(), 6, 64} : Plan{kAvx512x48.data(), 8, 48};
        case Isa::Avx2: return {kAvx2.data(), 6, 16, kAvx2Packed.data()};
#endif
        default: return {kPortable.data(), 4, 16};
    }
}

int padding(int n, int nr) { return (n + nr - 1) / nr * nr - n; }

// The panel width that pads n least (AVX-512 has two).
int panel_width(Isa isa, int n) {
    if (isa == Isa::Avx512) return padding(n, 64) < padding(n, 48) ? 64 : 48;
    return plan(isa, 0).nr;
}

// Fills p with B [k, n], at(row, col) giving each element. p's storage is reused when it is
// large enough, so repacking per layer (attention's keys and values) allocates nothing.
// p's shape and kernel for B [k, n], and its storage (at least that large; its contents are not kept).
float* start_panels(PackedMatrix& p, int k, int n, Isa isa) {
    p.k = k;
    p.n = n;
    p.isa = supported(isa) ? isa : best();
    p.nr = panel_width(p.isa, n);
    return at_least(p.data, static_cast<std::size_t>(p.panels()) * k * p.nr);
}

template <class At>
void pack_with(PackedMatrix& p, int k, int n, Isa isa, At at) {
    float* data = start_panels(p, k, n, isa);
    for (int panel = 0; panel < p.panels(); ++panel) {
        float* dst = data + static_cast<std::size_t>(panel) * k * p.nr;
        const int j0 = panel * p.nr, jn = std::min(p.nr, n - j0);
        for (int row = 0; row < k; ++row) {
            float* out = dst + static_cast<std::size_t>(row) * p.nr;
            for (int j = 0; j < jn; ++j) out[j] = at(row, j0 + j);
            std::fill(out + jn, out + p.nr, 0.0f);  // the padding the kernel multiplies by
        }
    }
}

}  // namespace

Isa best() {
    switch (cpu::level()) {
        case cpu::Level::Avx512: return Isa::Avx512;
        case cpu::Level::Avx2: return Isa::Avx2;
        case cpu::Level::Portable: break;
    }
    return Isa::Portable;
}

bool supported(Isa isa) {
    switch (isa) {
        case Isa::Avx512: return cpu::usable().avx512;
        case Isa::Avx2: return cpu::usable().avx2_fma;
        case Isa::Portable: return true;
    }
    return false;
}

void pack_into(PackedMatrix& into, const float* b, int k, int n, long ldb, Isa isa, bool bf16) {
    if (bf16) pack_with(into, k, n, isa, [&](int row, int col) { return quant::round_bf16(b[row * ldb + col]); });
    else pack_with(into, k, n, isa, [&](int row, int col) { return b[row * ldb + col]; });
}

// Attention's keys per layer, and fp32 weights from W's rows at load: each row of T read once, in
// order, and spread down its column of the panel (reading T down its columns instead cost ~2% of
// a forward).
void pack_transposed_into(PackedMatrix& into, const float* t, int n, int k, long ldt, float scale, Isa isa, bool bf16) {
    float* data = start_panels(into, k, n, isa);
    const int used = n - (into.panels() - 1) * into.nr;  // the last panel's columns that hold T's rows
    for (int i = 0; n > 0 && used < into.nr && i < k; ++i) {  // its padding, which the kernel multiplies by
        float* row = data + (static_cast<std::size_t>(into.panels() - 1) * k + i) * into.nr;
        std::fill(row + used, row + into.nr, 0.0f);
    }
    for (int col = 0; col < n; ++col) {
        const float* row = t + col * ldt;
        float* dst = data + static_cast<std::size_t>(col / into.nr) * k * into.nr + col % into.nr;
        if (bf16)
            for (int i = 0; i < k; ++i) dst[static_cast<std::size_t>(i) * into.nr] = quant::round_bf16(scale * row[i]);
        else
            for (int i = 0; i < k; ++i) dst[static_cast<std::size_t>(i) * into.nr] = scale * row[i];
    }
}

PackedMatrix pack(const float* b, int k, int n, long ldb, Isa isa) {
    PackedMatrix p;
    pack_into(p, b, k, n, ldb, isa);
    return p;
}

int packed_strip(const PackedMatrix& b) {
    const Plan pl = plan(b.isa, b.nr);
    return pl.packed ? pl.mr : 0;
}

void pack_rows(const float* a, long lda, int m, int k, int strip, float* out) {
    for (int r0 = 0; r0 < m; r0 += strip) {
        const int rows = std::min(strip, m - r0);
        float* dst = out + static_cast<std::size_t>(r0) * k;
        for (int p = 0; p < k; ++p)
            for (int r = 0; r < rows; ++r) dst[p * rows + r] = a[(r0 + r) * lda + p];
    }
}

namespace {

// C[0:m, c0:c1] panel by panel, each strip of rows through kernels[rows − 1]; strip(r) gives A's
// pointer and row stride for the strip that starts at row r.
template <class Strip>
void run_tiles(int m, const PackedMatrix& b, const Kernel* kernels, int mr, int c0, int c1, float* c, long ldc,
               const Epilogue& e, Strip strip) {
    const std::size_t panel_floats = static_cast<std::size_t>(b.k) * b.nr;
    const int panel_lines = static_cast<int>(panel_floats * sizeof(float) / 64);
    const int strips = (m + mr - 1) / mr, lines_per_strip = (panel_lines + strips - 1) / strips;
    for (int col = c0; col < c1; col += b.nr) {
        const float* panel = b.data.data() + static_cast<std::size_t>(col / b.nr) * panel_floats;
        // The strips of this panel share the fetch of the next one (the next task's, after c1).
        const bool last = col + b.nr >= b.n;
        const char* next = last ? nullptr : reinterpret_cast<const char*>(panel + panel_floats);
        TileJob t{std::min(b.nr, c1 - col), e.bias ? e.bias + col : nullptr, e.scale ? e.scale + col : nullptr};
        for (int r = 0, i = 0; r < m; r += mr, ++i) {
            const auto [a, lda] = strip(r);
            if (next) {
                t.fetch = next + static_cast<std::size_t>(i) * lines_per_strip * 64;
                t.fetch_lines = std::max(0, std::min(lines_per_strip, panel_lines - i * lines_per_strip));
            }
            kernels[std::min(mr, m - r) - 1](a, lda, panel, b.k, c + r * ldc + (col - c0), ldc, t);
        }
    }
}

}  // namespace

void multiply_packed(const float* ap, int m, const PackedMatrix& b, int c0, int c1, float* c, long ldc,
                     const Epilogue& e) {
    const Plan pl = plan(b.isa, b.nr);
    run_tiles(m, b, pl.packed, pl.mr, c0, c1, c, ldc, e,
              [&](int r) { return std::pair{ap + static_cast<std::size_t>(r) * b.k, 0L}; });
}

void multiply(const float* a, long lda, int m, const PackedMatrix& b, int c0, int c1, float* c, long ldc,
              const Epilogue& e) {
    const Plan pl = plan(b.isa, b.nr);
    run_tiles(m, b, pl.kernels, pl.mr, c0, c1, c, ldc, e, [&](int r) { return std::pair{a + r * lda, lda}; });
}

}  // namespace vitreg::gemm
