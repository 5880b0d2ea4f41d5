#include "core/peak.hpp"

#include <immintrin.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <ctime>
#include <cstdint>
#include <random>
#include <vector>

#include "amx.hpp"
#include "cpu.hpp"
#include "gemm_lowp.hpp"
#include "kernels.hpp"

namespace vitreg {

namespace {

// Twelve independent accumulators: more than FMA latency × ports on every core we know (4 × 2),
// so the loop is bound by throughput alone.
constexpr int kChains = 12;
volatile unsigned char g_sink;

// What the loop computed, folded into a volatile, so that none of it can be left out.
void keep(const void* values, std::size_t bytes) {
    unsigned char x = 0;
    for (std::size_t i = 0; i < bytes; ++i) x ^= static_cast<const unsigned char*>(values)[i];
    g_sink = x;
}

// One measuring loop: kChains accumulators of type V, each replaced by STEP(acc, a, b) at every
// iteration. Every step reads its accumulator, so nothing can be hoisted out of the loop.
#define VITREG_PEAK_LOOP(NAME, TARGET, V, OPERAND, INIT, A, B, STEP)          \
    __attribute__((target(TARGET))) void NAME(long iters) {                   \
        V acc[kChains];                                                        \
        for (int i = 0; i < kChains; ++i) acc[i] = INIT(i);                    \
        const OPERAND a = A, b = B;                                            \
        for (long n = 0; n < iters; ++n)                                       \
            for (int i = 0; i < kChains; ++i) acc[i] = STEP(acc[i], a, b);     \
        keep(acc, sizeof acc);                                                 \
    }

#if defined(__x86_64__)
// Without VNNI, int8 is u8 × s8 pairs to int16 (vpmaddubsw), pairs of those to int32 (vpmaddwd),
// added: three instructions a group of four bytes, fed here by the accumulator itself.
__attribute__((target("avx2"))) inline __m256i maddubs_step(__m256i acc, __m256i, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(acc, b), _mm256_set1_epi16(1)));
}

VITREG_PEAK_LOOP(fma256, "avx2,fma", __m256, __m256, _mm256_set1_ps, _mm256_set1_ps(0.999f), _mm256_set1_ps(1e-4f),
                 _mm256_fmadd_ps)
VITREG_PEAK_LOOP(fma512, "avx512f", __m512, __m512, _mm512_set1_ps, _mm512_set1_ps(0.999f), _mm512_set1_ps(1e-4f),
                 _mm512_fmadd_ps)
VITREG_PEAK_LOOP(dpbf16_512, "avx512f,avx512bf16", __m512, __m512bh, _mm512_set1_ps,
                 (__m512bh)_mm512_set1_epi32(0x3f803f80), (__m512bh)_mm512_set1_epi32(0x38d138d1), _mm512_dpbf16_ps)
VITREG_PEAK_LOOP(dpbusd512, "avx512f,avx512vnni", __m512i, __m512i, _mm512_set1_epi32, _mm512_set1_epi32(0x01010101),
                 _mm512_set1_epi32(0x01ff01ff), _mm512_dpbusd_epi32)
VITREG_PEAK_LOOP(dpbusd256, "avx2,avxvnni", __m256i, __m256i, _mm256_set1_epi32, _mm256_set1_epi32(0x01010101),
                 _mm256_set1_epi32(0x01ff01ff), _mm256_dpbusd_avx_epi32)
// The same vpdpbusd on 256 bits in its EVEX form (AVX512-VNNI with VL: Zen 4, Ice Lake and later
// Xeons), and vpdpwssd, the int16 pairs' dot product, on each width.
VITREG_PEAK_LOOP(dpbusd256_evex, "avx512vl,avx512vnni", __m256i, __m256i, _mm256_set1_epi32,
                 _mm256_set1_epi32(0x01010101), _mm256_set1_epi32(0x01ff01ff), _mm256_dpbusd_epi32)
VITREG_PEAK_LOOP(dpwssd512, "avx512f,avx512vnni", __m512i, __m512i, _mm512_set1_epi32, _mm512_set1_epi32(0x00010001),
                 _mm512_set1_epi32(0x0002fffe), _mm512_dpwssd_epi32)
VITREG_PEAK_LOOP(dpwssd256, "avx2,avxvnni", __m256i, __m256i, _mm256_set1_epi32, _mm256_set1_epi32(0x00010001),
                 _mm256_set1_epi32(0x0002fffe), _mm256_dpwssd_avx_epi32)
VITREG_PEAK_LOOP(maddubs256, "avx2", __m256i, __m256i, _mm256_set1_epi32, _mm256_set1_epi32(0x01010101),
                 _mm256_set1_epi32(0x01ff01ff), maddubs_step)

// AMX: four independent 16 × 16 accumulator tiles, each fed by tiles loaded once.
template <bool Bf16>
VITREG_AMX_TARGET void amx_loop(long iters) {
    amx::configure();
    alignas(64) static std::uint32_t operand[256], out[4][256];
    for (int i = 0; i < 256; ++i) operand[i] = 0x00010001u;  // small values: no overflow, no denormals
    _tile_loadd(4, operand, 64);
    _tile_loadd(5, operand, 64);
    _tile_loadd(6, operand, 64);
    _tile_loadd(7, operand, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long n = 0; n < iters; ++n) amx::products<Bf16>();
    _tile_stored(0, out[0], 64);
    _tile_stored(1, out[1], 64);
    _tile_stored(2, out[2], 64);
    _tile_stored(3, out[3], 64);
    _tile_release();
    keep(out, sizeof out);
}
#endif
#undef VITREG_PEAK_LOOP

// This thread's CPU time: a neighbour that takes the core away for a while does not count.
double thread_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Operations per second of loop(iters), where one iteration does `ops` operations: the loop is
// grown until one run takes `seconds`; that run and four more count, the best of the five.
double rate(void (*loop)(long), double ops, double seconds) {
    long iters = 1 << 14;
    double best = 0;
    for (int counted = 0; counted < 5;) {
        const double t0 = thread_seconds();
        loop(iters);
        const double s = thread_seconds() - t0;
        if (counted || s >= seconds || iters > (1L << 40)) {
            best = std::max(best, ops * static_cast<double>(iters) / std::max(s, 1e-9));
            ++counted;
        } else {
            iters = static_cast<long>(static_cast<double>(iters) * std::min(16.0, 1.2 * seconds / std::max(s, 1e-6)));
        }
    }
    return best;
}

#if defined(__x86_64__)
// vpdpbusd on both widths and vpdpwssd on the widest, where the CPU has VNNI (the EVEX forms
// with AVX512-VNNI, the VEX ones with AVX-VNNI); else int8's two-instruction emulation.
void measure_dot_products(const cpu::Features& f, double seconds, CorePeak& p) {
    if (f.avx_vnni) p.int8_256 = rate(dpbusd256, kChains * 32 * 2.0, seconds) / 1e9;
    else if (f.avx512 && f.avx512_vnni) p.int8_256 = rate(dpbusd256_evex, kChains * 32 * 2.0, seconds) / 1e9;
    if (f.avx512_vnni) {
        p.int8 = rate(dpbusd512, kChains * 64 * 2.0, seconds) / 1e9;
        p.int8_instruction = "vpdpbusd (512-bit)";
        p.int16 = rate(dpwssd512, kChains * 32 * 2.0, seconds) / 1e9;
        p.int16_instruction = "vpdpwssd (512-bit)";
    } else if (f.avx_vnni) {
        p.int8 = p.int8_256;
        p.int8_instruction = "vpdpbusd (256-bit)";
        p.int16 = rate(dpwssd256, kChains * 16 * 2.0, seconds) / 1e9;
        p.int16_instruction = "vpdpwssd (256-bit)";
    } else if (f.avx2_fma) {
        p.int8 = rate(maddubs256, kChains * 32 * 2.0, seconds) / 1e9;
        p.int8_instruction = "vpmaddubsw + vpmaddwd";
    }
}
#endif

}  // namespace

CorePeak measure_core_peak(double seconds) {
    CorePeak p;
#if defined(__x86_64__)
    const cpu::Features& f = cpu::detected();
    if (f.avx2_fma) p.fma256 = rate(fma256, kChains * 8 * 2.0, seconds) / 1e9;
    if (f.avx512) p.fma512 = rate(fma512, kChains * 16 * 2.0, seconds) / 1e9;
    if (f.avx512_bf16) p.bf16 = rate(dpbf16_512, kChains * 32 * 2.0, seconds) / 1e9;
    // One iteration: four tile products of 16 × 16 outputs over 64 int8 (or 32 bf16 pairs).
    if (f.amx_int8) p.amx_int8 = rate(amx_loop<false>, 4 * 16 * 16 * 64 * 2.0, seconds) / 1e9;
    if (f.amx_bf16) p.amx_bf16 = rate(amx_loop<true>, 4 * 16 * 16 * 32 * 2.0, seconds) / 1e9;
    measure_dot_products(f, seconds, p);
#else
    (void)seconds;
#endif
    p.kernels = cpu::describe_level();
    p.kernel_peak = cpu::level() == cpu::Level::Avx512 ? p.fma512 : cpu::level() == cpu::Level::Avx2 ? p.fma256 : 0.0;
    return p;
}

CorePeak higher(const CorePeak& a, const CorePeak& b) {
    CorePeak p = a;
    for (auto field : {&CorePeak::fma256, &CorePeak::fma512, &CorePeak::bf16, &CorePeak::int8, &CorePeak::int8_256,
                       &CorePeak::int16, &CorePeak::amx_int8, &CorePeak::amx_bf16, &CorePeak::kernel_peak})
        p.*field = std::max(a.*field, b.*field);
    return p;
}

double precision_peak(const CorePeak& peak, const PrecisionOptions& precision, std::string* kernel) {
    if (precision.precision == Precision::Int8 || precision.precision == Precision::Int4) {
        const bool int4 = precision.precision == Precision::Int4;
        const gemm::Int8Isa isa = int4 ? gemm::int4_kernel() : gemm::int8_kernel(precision.int8_weight_bits);
        *kernel = std::string(gemm::to_string(isa)) + (int4 ? " on int4 weights unpacked to int8" : "");
        if (isa == gemm::Int8Isa::Amx) return peak.amx_int8;
        return isa == gemm::Int8Isa::Avx512Vnni || isa == gemm::Int8Isa::Avx256Vnni ? peak.int8 : 0.0;
    }
    if (precision.precision == Precision::Bf16 && gemm::native_bf16()) {
        *kernel = gemm::to_string(gemm::best_bf16());
        return gemm::best_bf16() == gemm::Bf16Isa::Amx ? peak.amx_bf16 : peak.bf16;
    }
    *kernel = precision.precision == Precision::Bf16 ? "bf16-rounded operands on " + peak.kernels : peak.kernels;
    return peak.kernel_peak;
}

double linear_gflops(int rows, int in, int out, const PrecisionOptions& precision, int repeats) {
    tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
    std::mt19937 rng(0);
    std::normal_distribution<float> normal;
    std::vector<float> w(static_cast<std::size_t>(out) * in), x(static_cast<std::size_t>(rows) * in),
        y(static_cast<std::size_t>(rows) * out);
    for (auto& v : w) v = 0.05f * normal(rng);
    for (auto& v : x) v = normal(rng);
    const kernels::Linear layer = kernels::make_linear(w.data(), out, in, Eigen::VectorXf::Zero(out), precision.precision,
                                                       std::nullopt, precision.int8_weight_bits);
    kernels::LinearScratch scratch;
    double best = 0;
    for (int r = 0; r < repeats + 1; ++r) {  // the first run warms the caches and is not counted
        const double t0 = thread_seconds();  // one thread: TBB runs the tasks on this one
        kernels::linear(x.data(), rows, layer, y.data(), kernels::Epilogue::Bias, scratch);
        const double s = thread_seconds() - t0;
        if (r) best = std::max(best, 2.0 * rows * in * out / s / 1e9);
    }
    return best;
}

}  // namespace vitreg
