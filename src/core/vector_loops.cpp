#include "vector_loops.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "gemm.hpp"

// One body, three targets. Only the functions that vector_loops.inc defines take a target:
// what they call comes inline from the headers above, compiled for the baseline, so no
// out-of-line copy of a shared inline function can carry AVX code into the rest of the program.
#if defined(__clang__)
#define VITREG_TARGET_BEGIN(T) _Pragma(T) 
#define VITREG_TARGET_END _Pragma("clang attribute pop")
#define VITREG_AVX512 "clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma\"))), apply_to = function)"
#define VITREG_AVX2 "clang attribute push(__attribute__((target(\"avx2,fma\"))), apply_to = function)"
#else
#define VITREG_TARGET_BEGIN(T) _Pragma("GCC push_options") _Pragma(T)
#define VITREG_TARGET_END _Pragma("GCC pop_options")
#define VITREG_AVX512 "GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512\")"
#define VITREG_AVX2 "GCC target(\"avx2,fma\")"
#endif

namespace vitreg::loops {

#if defined(__x86_64__)
namespace avx512 {
VITREG_TARGET_BEGIN(VITREG_AVX512)
#include "vector_loops.inc"
VITREG_TARGET_END
}  // namespace avx512

namespace avx2 {
VITREG_TARGET_BEGIN(VITREG_AVX2)
#include "vector_loops.inc"
VITREG_TARGET_END
}  // namespace avx2
#endif

namespace portable {
#include "vector_loops.inc"
}  // namespace portable

const Table& table(cpu::Level level) {
    switch (level) {
#if defined(__x86_64__)
        case cpu::Level::Avx512: return avx512::kTable;
        case cpu::Level::Avx2: return avx2::kTable;
#endif
        default: return portable::kTable;
    }
}

const Table& active() { return table(cpu::level()); }

}  // namespace vitreg::loops
