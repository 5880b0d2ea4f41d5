#include "transpose.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstddef>

#include "cpu.hpp"

namespace vitreg::gemm {

namespace {

#if defined(__x86_64__)
// One block of at most 16 × 16: rows loaded (masked to cols), interleaved 32, 64 and 128 bits at
// a time, each column stored (masked to rows). Scalar, the in-place linears had spent 2–3% of a
// 7B forward moving these values one at a time.
__attribute__((target("avx512f"))) void block16(const std::uint32_t* src, long lds, int rows, int cols,
                                               std::uint32_t* dst, long ldd) {
    const __mmask16 load = static_cast<__mmask16>((1u << cols) - 1), store = static_cast<__mmask16>((1u << rows) - 1);
    __m512i r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_epi32(load, src + i * lds) : _mm512_setzero_si512();
    for (int i = 0; i < 16; i += 2) {  // per 128-bit lane L: (r_i, r_i+1) at columns 4L, 4L + 1 and 4L + 2, 4L + 3
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {  // r_{i+j}, lane L: rows i .. i + 3 of column 4L + j
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int h = 0; h < 16; h += 8)  // lanes 0, 2 and 1, 3 of rows h .. h + 3 and h + 4 .. h + 7
        for (int j = 0; j < 4; ++j) {
            t[h + j] = _mm512_shuffle_i32x4(r[h + j], r[h + 4 + j], 0x88);
            t[h + 4 + j] = _mm512_shuffle_i32x4(r[h + j], r[h + 4 + j], 0xdd);
        }
    for (int j = 0; j < 8; ++j) {  // columns j and 8 + j: rows 0 .. 7 from t_j, 8 .. 15 from t_{8+j}
        if (j < cols) _mm512_mask_storeu_epi32(dst + j * ldd, store, _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88));
        if (j + 8 < cols) _mm512_mask_storeu_epi32(dst + (j + 8) * ldd, store, _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd));
    }
}
#endif

}  // namespace

void transpose32(const std::uint32_t* src, long lds, int rows, int cols, std::uint32_t* dst, long ldd) {
#if defined(__x86_64__)
    if (cpu::usable().avx512) {
        for (int r0 = 0; r0 < rows; r0 += 16)
            for (int c0 = 0; c0 < cols; c0 += 16)
                block16(src + r0 * lds + c0, lds, std::min(16, rows - r0), std::min(16, cols - c0), dst + c0 * ldd + r0, ldd);
        return;
    }
#endif
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) dst[static_cast<std::size_t>(c) * ldd + r] = src[static_cast<std::size_t>(r) * lds + c];
}

}  // namespace vitreg::gemm
