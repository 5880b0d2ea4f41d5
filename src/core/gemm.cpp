#include "gemm.hpp"

#include <immintrin.h>

#include <algorithm>

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

// ---- AVX-512: 12 rows × 32 columns, 24 accumulators --------------------------------------
#if defined(__x86_64__)
template <int MR>
__attribute__((target("avx512f"))) void kernel_avx512(const float* a, long lda, const float* bp, int k, float* c,
                                                      long ldc, int cols) {
    __m512 acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int p = 0; p < k; ++p) {
        const __m512 b0 = _mm512_loadu_ps(bp + p * 32), b1 = _mm512_loadu_ps(bp + p * 32 + 16);
        for (int r = 0; r < MR; ++r) {
            const __m512 av = _mm512_set1_ps(a[r * lda + p]);
            acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    const __mmask16 m0 = cols >= 16 ? 0xffff : static_cast<__mmask16>((1u << cols) - 1);
    const __mmask16 m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : static_cast<__mmask16>((1u << (cols - 16)) - 1);
    for (int r = 0; r < MR; ++r) {
        _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
        _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
    }
}

// ---- AVX2 + FMA: 6 rows × 16 columns, 12 accumulators ------------------------------------
template <int MR>
__attribute__((target("avx2,fma"))) void kernel_avx2(const float* a, long lda, const float* bp, int k, float* c,
                                                     long ldc, int cols) {
    __m256 acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int p = 0; p < k; ++p) {
        const __m256 b0 = _mm256_loadu_ps(bp + p * 16), b1 = _mm256_loadu_ps(bp + p * 16 + 8);
        for (int r = 0; r < MR; ++r) {
            const __m256 av = _mm256_broadcast_ss(a + r * lda + p);
            acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < MR; ++r) {
        if (cols == 16) {
            _mm256_storeu_ps(c + r * ldc, acc[r][0]);
            _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
        } else {
            alignas(32) float tmp[16];
            _mm256_store_ps(tmp, acc[r][0]);
            _mm256_store_ps(tmp + 8, acc[r][1]);
            std::copy(tmp, tmp + cols, c + r * ldc);
        }
    }
}
#endif

// ---- Portable: 4 rows × 16 columns ------------------------------------------------------
template <int MR>
void kernel_portable(const float* a, long lda, const float* bp, int k, float* c, long ldc, int cols) {
    float acc[MR][16] = {};
    for (int p = 0; p < k; ++p)
        for (int r = 0; r < MR; ++r) {
            const float av = a[r * lda + p];
            for (int j = 0; j < 16; ++j) acc[r][j] += av * bp[p * 16 + j];
        }
    for (int r = 0; r < MR; ++r) std::copy(acc[r], acc[r] + cols, c + r * ldc);
}

using Kernel = void (*)(const float*, long, const float*, int, float*, long, int);

// Table entry i handles i+1 rows (the full strip, then the remainder).
#if defined(__x86_64__)
const Kernel kAvx512[12] = {kernel_avx512<1>, kernel_avx512<2>, kernel_avx512<3>,  kernel_avx512<4>,
                            kernel_avx512<5>, kernel_avx512<6>, kernel_avx512<7>,  kernel_avx512<8>,
                            kernel_avx512<9>, kernel_avx512<10>, kernel_avx512<11>, kernel_avx512<12>};
const Kernel kAvx2[6] = {kernel_avx2<1>, kernel_avx2<2>, kernel_avx2<3>, kernel_avx2<4>, kernel_avx2<5>, kernel_avx2<6>};
#endif
const Kernel kPortable[4] = {kernel_portable<1>, kernel_portable<2>, kernel_portable<3>, kernel_portable<4>};

struct Plan {
    const Kernel* kernels;
    int mr, nr;
};

Plan plan(Isa isa) {
    switch (isa) {
#if defined(__x86_64__)
        case Isa::Avx512: return {kAvx512, 12, 32};
        case Isa::Avx2: return {kAvx2, 6, 16};
#endif
        default: return {kPortable, 4, 16};
    }
}

template <class At>
PackedMatrix pack_with(int k, int n, Isa isa, At at) {
    PackedMatrix p;
    p.k = k;
    p.n = n;
    p.isa = supported(isa) ? isa : best();
    p.nr = plan(p.isa).nr;
    p.data.assign(static_cast<std::size_t>(p.panels()) * k * p.nr, 0.0f);
    for (int panel = 0; panel < p.panels(); ++panel) {
        float* dst = p.data.data() + static_cast<std::size_t>(panel) * k * p.nr;
        const int j0 = panel * p.nr, jn = std::min(p.nr, n - j0);
        for (int row = 0; row < k; ++row)
            for (int j = 0; j < jn; ++j) dst[row * p.nr + j] = at(row, j0 + j);
    }
    return p;
}

}  // namespace

Isa best() { return kIsa; }

bool supported(Isa isa) {
    switch (isa) {
        case Isa::Avx512: return kIsa == Isa::Avx512;
        case Isa::Avx2: return kIsa == Isa::Avx512 || kIsa == Isa::Avx2;
        case Isa::Portable: return true;
    }
    return false;
}

PackedMatrix pack(const float* b, int k, int n, long ldb, Isa isa) {
    return pack_with(k, n, isa, [&](int row, int col) { return b[row * ldb + col]; });
}

PackedMatrix pack_transposed(const float* t, int n, int k, long ldt, Isa isa) {
    return pack_with(k, n, isa, [&](int row, int col) { return t[col * ldt + row]; });
}

void multiply(const float* a, long lda, int m, const PackedMatrix& b, int c0, int c1, float* c, long ldc) {
    const Plan pl = plan(b.isa);
    for (int col = c0; col < c1; col += b.nr) {
        const float* panel = b.data.data() + static_cast<std::size_t>(col / b.nr) * b.k * b.nr;
        const int cols = std::min(b.nr, c1 - col);
        float* cc = c + (col - c0);
        int r = 0;
        for (; r + pl.mr <= m; r += pl.mr) pl.kernels[pl.mr - 1](a + r * lda, lda, panel, b.k, cc + r * ldc, ldc, cols);
        if (r < m) pl.kernels[m - r - 1](a + r * lda, lda, panel, b.k, cc + r * ldc, ldc, cols);
    }
}

}  // namespace vitreg::gemm
