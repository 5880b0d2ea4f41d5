#include "gemm.hpp"

#include "cpu.hpp"
#include "quantize.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

namespace vitreg::gemm {

namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
    return Isa::Portable;
}

const Isa kIsa = detect();

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
// The k loop, in assembly: accumulator (row r, vector v) in zmm(NV·r + v), B's row in zmm24–27,
// A's broadcasts in zmm28–31; four steps of k per iteration, then one at a time. GCC 12 had
// compiled the same loop from intrinsics with register copies and an order that left part of
// the FMA rate unused: 8 × 48 on a Xeon, A from L2 and B from L3, 163 against 174–182 GFLOP/s.
// The sums are the same: each accumulator is one FMA chain over k in order. `fetch_lines` lines
// from `fetch` go to L2 on the way, one per two steps. Each accumulator ends at acc + 64·index.
#define VITREG_ROW(r, s, addr, z, c0, c1, c2, c3)                                   \
    ".if %c[mr] > " #r "\n\t"                                                       \
    "vbroadcastss 4*" #s addr ", %%zmm" #z "\n\t"                                   \
    "vfmadd231ps %%zmm24, %%zmm" #z ", %%zmm" #c0 "\n\t"                            \
    "vfmadd231ps %%zmm25, %%zmm" #z ", %%zmm" #c1 "\n\t"                            \
    "vfmadd231ps %%zmm26, %%zmm" #z ", %%zmm" #c2 "\n\t"                            \
    ".if %c[nv] == 4\n\tvfmadd231ps %%zmm27, %%zmm" #z ", %%zmm" #c3 "\n\t.endif\n\t" \
    ".endif\n\t"
// Row r of A at a + r·L: r = 3..7 through a3 = a + 3L and L3 = 3L (an address scales by 1, 2, 4, 8).
#define VITREG_STEP(s)                                                                              \
    "vmovups " #s "*%c[nrb](%[b]), %%zmm24\n\t"                                                     \
    "vmovups " #s "*%c[nrb]+64(%[b]), %%zmm25\n\t"                                                  \
    "vmovups " #s "*%c[nrb]+128(%[b]), %%zmm26\n\t"                                                 \
    ".if %c[nv] == 4\n\tvmovups " #s "*%c[nrb]+192(%[b]), %%zmm27\n\t.endif\n\t"                    \
    ".if %c[nv] == 3\n\t"                                                                           \
    VITREG_ROW(0, s, "(%[a])", 28, 0, 1, 2, 0) VITREG_ROW(1, s, "(%[a],%[L])", 29, 3, 4, 5, 0)      \
    VITREG_ROW(2, s, "(%[a],%[L],2)", 30, 6, 7, 8, 0) VITREG_ROW(3, s, "(%[a3])", 31, 9, 10, 11, 0) \
    VITREG_ROW(4, s, "(%[a],%[L],4)", 28, 12, 13, 14, 0)                                            \
    VITREG_ROW(5, s, "(%[a3],%[L],2)", 29, 15, 16, 17, 0)                                           \
    VITREG_ROW(6, s, "(%[a3],%[L3])", 30, 18, 19, 20, 0)                                            \
    VITREG_ROW(7, s, "(%[a3],%[L],4)", 31, 21, 22, 23, 0)                                           \
    ".else\n\t"                                                                                     \
    VITREG_ROW(0, s, "(%[a])", 28, 0, 1, 2, 3) VITREG_ROW(1, s, "(%[a],%[L])", 29, 4, 5, 6, 7)      \
    VITREG_ROW(2, s, "(%[a],%[L],2)", 30, 8, 9, 10, 11) VITREG_ROW(3, s, "(%[a3])", 31, 12, 13, 14, 15) \
    VITREG_ROW(4, s, "(%[a],%[L],4)", 28, 16, 17, 18, 19)                                           \
    VITREG_ROW(5, s, "(%[a3],%[L],2)", 29, 20, 21, 22, 23)                                          \
    ".endif\n\t"
#define VITREG_ZERO(n) "vpxord %%zmm" #n ", %%zmm" #n ", %%zmm" #n "\n\t"
#define VITREG_STORE(n) ".if %c[mr] * %c[nv] > " #n "\n\tvmovaps %%zmm" #n ", " #n "*64(%[o])\n\t.endif\n\t"
#define VITREG_EACH(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15) \
    F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)

template <int MR, int NV>
__attribute__((target("avx512f"))) inline void avx512_product(const float* a, long lda, const float* bp, int k,
                                                              const char* fetch, int fetch_lines, float* acc) {
    static_assert(MR >= 1 && MR * NV <= 24 && (NV == 3 ? MR <= 8 : NV == 4 && MR <= 6), "the registers hold 24");
    long quads = k / 4, singles = k % 4, lines = fetch_lines;
    const long row_bytes = lda * static_cast<long>(sizeof(float));
    const float* a3;
    long row_bytes3;
    asm volatile(
        VITREG_EACH(VITREG_ZERO)
        "lea (%[L],%[L],2), %[L3]\n\t"
        "lea (%[a],%[L3]), %[a3]\n\t"
        "test %[n4], %[n4]\n\t"
        "jz 3f\n\t"
        "1:\n\t"
        VITREG_STEP(0) VITREG_STEP(1) VITREG_STEP(2) VITREG_STEP(3)
        "test %[fl], %[fl]\n\t"
        "jle 2f\n\t"
        "prefetcht1 (%[f])\n\t"
        "prefetcht1 64(%[f])\n\t"
        "add $128, %[f]\n\t"
        "sub $2, %[fl]\n\t"
        "2:\n\t"
        "add $4*%c[nrb], %[b]\n\t"
        "add $16, %[a]\n\t"
        "add $16, %[a3]\n\t"
        "dec %[n4]\n\t"
        "jnz 1b\n\t"
        "3:\n\t"
        "test %[n1], %[n1]\n\t"
        "jz 5f\n\t"
        "4:\n\t"
        VITREG_STEP(0)
        "add $%c[nrb], %[b]\n\t"
        "add $4, %[a]\n\t"
        "add $4, %[a3]\n\t"
        "dec %[n1]\n\t"
        "jnz 4b\n\t"
        "5:\n\t"
        VITREG_EACH(VITREG_STORE)
        : [b] "+r"(bp), [a] "+r"(a), [n4] "+r"(quads), [n1] "+r"(singles), [f] "+r"(fetch), [fl] "+r"(lines),
          [a3] "=&r"(a3), [L3] "=&r"(row_bytes3)
        : [L] "r"(row_bytes), [o] "r"(acc), [mr] "i"(MR), [nv] "i"(NV), [nrb] "i"(NV * 64)
        : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
          "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
}
#undef VITREG_ROW
#undef VITREG_STEP
#undef VITREG_ZERO
#undef VITREG_STORE
#undef VITREG_EACH

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
// The k loop in assembly, as the AVX-512 one: accumulator (row r, half v) in ymm(2r + v), B's row
// in ymm12–13, A's broadcasts in ymm14–15, four steps per iteration; one line of `fetch` per
// iteration to L2. (From intrinsics GCC 12 had kept an array of accumulators in memory; named,
// they had reached the Xeon's 256-bit peak with operands in L1, but not with B from L2.)
// PACKED: A is one strip of [k][MR] (pack_rows), one stream instead of MR rows: 6% faster on
// a Xeon (2088 × 384 · 384 × 1152, 124 against 117 GFLOP/s); lda is then unused.
#define VITREG_ROW(r, s, addr, z, c0, c1)                                                 \
    ".if %c[mr] > " #r "\n\t"                                                             \
    ".if %c[packed]\n\tvbroadcastss 4*(" #s "*%c[mr]+" #r ")(%[a]), %%ymm" #z "\n\t"       \
    ".else\n\tvbroadcastss 4*" #s addr ", %%ymm" #z "\n\t.endif\n\t"                      \
    "vfmadd231ps %%ymm12, %%ymm" #z ", %%ymm" #c0 "\n\t"                                  \
    "vfmadd231ps %%ymm13, %%ymm" #z ", %%ymm" #c1 "\n\t"                                  \
    ".endif\n\t"
#define VITREG_STEP(s)                                                                                 \
    "vmovups " #s "*64(%[b]), %%ymm12\n\t"                                                             \
    "vmovups " #s "*64+32(%[b]), %%ymm13\n\t"                                                          \
    VITREG_ROW(0, s, "(%[a])", 14, 0, 1) VITREG_ROW(1, s, "(%[a],%[L])", 15, 2, 3)                     \
    VITREG_ROW(2, s, "(%[a],%[L],2)", 14, 4, 5) VITREG_ROW(3, s, "(%[a3])", 15, 6, 7)                  \
    VITREG_ROW(4, s, "(%[a],%[L],4)", 14, 8, 9) VITREG_ROW(5, s, "(%[a3],%[L],2)", 15, 10, 11)
#define VITREG_ZERO(n) "vxorps %%xmm" #n ", %%xmm" #n ", %%xmm" #n "\n\t"
#define VITREG_STORE(n) ".if 2 * %c[mr] > " #n "\n\tvmovaps %%ymm" #n ", " #n "*32(%[o])\n\t.endif\n\t"
#define VITREG_EACH(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)

template <int MR, bool PACKED>
__attribute__((target("avx2,fma"))) inline void avx2_product(const float* a, long lda, const float* bp, int k,
                                                             const char* fetch, int fetch_lines, float* acc) {
    static_assert(MR >= 1 && MR <= 6, "six rows at most");
    long quads = k / 4, singles = k % 4, lines = fetch_lines;
    const long row_bytes = PACKED ? 0 : lda * static_cast<long>(sizeof(float));
    const float* a3;
    long row_bytes3;
    asm volatile(
        VITREG_EACH(VITREG_ZERO)
        "lea (%[L],%[L],2), %[L3]\n\t"
        "lea (%[a],%[L3]), %[a3]\n\t"
        "test %[n4], %[n4]\n\t"
        "jz 3f\n\t"
        "1:\n\t"
        VITREG_STEP(0) VITREG_STEP(1) VITREG_STEP(2) VITREG_STEP(3)
        "test %[fl], %[fl]\n\t"
        "jle 2f\n\t"
        "prefetcht1 (%[f])\n\t"
        "add $64, %[f]\n\t"
        "dec %[fl]\n\t"
        "2:\n\t"
        "add $256, %[b]\n\t"
        "add $4*%c[astep], %[a]\n\t"
        "add $4*%c[astep], %[a3]\n\t"
        "dec %[n4]\n\t"
        "jnz 1b\n\t"
        "3:\n\t"
        "test %[n1], %[n1]\n\t"
        "jz 5f\n\t"
        "4:\n\t"
        VITREG_STEP(0)
        "add $64, %[b]\n\t"
        "add $%c[astep], %[a]\n\t"
        "add $%c[astep], %[a3]\n\t"
        "dec %[n1]\n\t"
        "jnz 4b\n\t"
        "5:\n\t"
        VITREG_EACH(VITREG_STORE)
        : [b] "+r"(bp), [a] "+r"(a), [n4] "+r"(quads), [n1] "+r"(singles), [f] "+r"(fetch), [fl] "+r"(lines),
          [a3] "=&r"(a3), [L3] "=&r"(row_bytes3)
        : [L] "r"(row_bytes), [o] "r"(acc), [mr] "i"(MR), [packed] "i"(PACKED ? 1 : 0),
          [astep] "i"(PACKED ? 4 * MR : 4)
        : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}
#undef VITREG_ROW
#undef VITREG_STEP
#undef VITREG_ZERO
#undef VITREG_STORE
#undef VITREG_EACH

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
// p's shape and kernel for B [k, n], and its storage (at least that large, contents left as they are).
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

// Attention's keys, per layer: each row of T read once, in order, and spread down its column of
// the panel (reading T down its columns instead cost ~2% of a forward).
void pack_transposed_into(PackedMatrix& into, const float* t, int n, int k, long ldt, float scale, Isa isa, bool bf16) {
    float* data = start_panels(into, k, n, isa);
    std::fill(data, data + static_cast<std::size_t>(into.panels()) * k * into.nr, 0.0f);  // the padding columns
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
