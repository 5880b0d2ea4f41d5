#include "half_rows.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "safetensors.hpp"

namespace vitreg {

namespace {

void portable_half(const float* x, std::size_t n, std::uint16_t* out) {
    for (std::size_t i = 0; i < n; ++i) out[i] = float_to_half(x[i]);
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void avx512_half(const float* x, std::size_t n, std::uint16_t* out) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    portable_half(x + i, n - i, out + i);
}

__attribute__((target("avx2,f16c"))) void f16c_half(const float* x, std::size_t n, std::uint16_t* out) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    portable_half(x + i, n - i, out + i);
}
#endif

}  // namespace

void floats_to_half(cpu::Level level, const float* x, std::size_t n, std::uint16_t* out) {
#if defined(__x86_64__)
    const cpu::Features& hw = cpu::detected();
    if (level == cpu::Level::Avx512 && hw.avx512) return avx512_half(x, n, out);
    if (level >= cpu::Level::Avx2 && hw.f16c) return f16c_half(x, n, out);
#endif
    portable_half(x, n, out);
}

void floats_to_half(const float* x, std::size_t n, std::uint16_t* out) { floats_to_half(cpu::level(), x, n, out); }

}  // namespace vitreg
