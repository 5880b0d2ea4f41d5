#include "gemm_lowp.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "amx.hpp"
#include "cpu.hpp"
#include "vector_loops.hpp"
#include "vitreg/error.hpp"
#include <utility>

#include "parallel_each.hpp"
#include "transpose.hpp"

namespace vitreg::gemm {

namespace {

// One tile: MR rows of A against one panel, the raw accumulators written to `out` [MR][nr]
// (64-byte aligned: the assembly tiles store whole vectors there).
using Tile = detail::LowpTile;
using Tiles = detail::LowpTiles;
constexpr int kMaxTile = detail::kMaxLowpTile;

inline float bits_to_float(std::uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

}  // namespace

// ---- bf16 kernels: vdpbf16ps, and the same in C++ (odd k first, products exact) -------------
#if defined(__x86_64__)
// vdpbf16ps and vpdpbusd run in the fp32 kernels' assembly k loop: from intrinsics, GCC 12 had
// stored and copied the 24 accumulators at every step (the int8 linears at 39% of vpdpbusd's
// peak on a Zen 4).
namespace {
#include "gemm_k_loops.inc"
}  // namespace

// The tiles of one instruction on 16·NV columns, 1 to 8 rows. bf16 and int8 run 48 columns; a
// last panel of at most 16 or 32 runs one or two vectors wide, not 48: a 201-token input to a
// linear whose weights are the broadcast side (kernels.cpp, weights in place) would otherwise
// compute 240 columns. Int8DotSigned is int8 in place (int8_in_place): A's signed bytes
// broadcast against B's unsigned ones.
// (64 columns: 6 rows, the assembly loop's 24 accumulators.)
template <Mac OP, int NV>
struct AsmTiles {
    static constexpr int kMr = NV == 4 ? 6 : 8;
    template <int MR>
    __attribute__((target("avx512f"))) static void tile(const std::uint32_t* a, long lda, const std::uint32_t* bp,
                                                        int groups, void* out) {
        avx512_product<MR, NV, OP>(a, lda, bp, groups, nullptr, 0, out);
    }
    template <std::size_t... I>
    static constexpr std::array<Tile, sizeof...(I)> list(std::index_sequence<I...>) {
        return {&tile<static_cast<int>(I) + 1>...};
    }
    static constexpr std::array<Tile, kMr> kList = list(std::make_index_sequence<kMr>());
    static constexpr Tiles kernels{kList.data(), kMr, 16 * NV};
};

#endif

// The executable specification of vdpbf16ps: the kernel where the CPU lacks it.
#define VITREG_LOWP_TARGET
namespace bf16_portable {
using V = std::uint32_t;
using VAcc = float;
using Acc = float;
constexpr int kLanes = 1, kNv = 16, kMr = 4;
struct Pair {
    float odd, even;
};
inline VAcc zero() { return 0.0f; }
inline V load(const std::uint32_t* p) { return *p; }
inline V broadcast(std::uint32_t x) { return x; }
inline Pair split(V x) { return {bits_to_float(x & 0xffff0000u), bits_to_float(x << 16)}; }
inline Pair prep_a(V a) { return split(a); }
inline Pair prep_b(V b) { return split(b); }
// The products are exact, so a fused and an unfused multiply-add round the same.
inline VAcc step(VAcc acc, Pair a, Pair b) { return (acc + a.odd * b.odd) + a.even * b.even; }
inline void store(float* o, VAcc v) { *o = v; }
#include "gemm_lowp_tile.inc"
}  // namespace bf16_portable
#undef VITREG_LOWP_TARGET

// ---- int8 kernels: vpdpbusd, 512 and 256 bits, then its exact emulation ---------------------
#if defined(__x86_64__)

// int8 dot products of four bytes into 32-bit lanes on 256 bits, DOT(acc, a, b) being vpdpbusd
// (two encodings: AVX512-VNNI with VL (EVEX) and AVX-VNNI (VEX)) or its replay for 7-bit weights.
#define VITREG_INT8_256(NAME, DOT, MR)                                                                  \
    namespace NAME {                                                                                    \
    using V = __m256i;                                                                                  \
    using VAcc = __m256i;                                                                               \
    using Acc = std::int32_t;                                                                           \
    constexpr int kLanes = 8, kNv = 2, kMr = MR;                                                        \
    VITREG_LOWP_TARGET inline VAcc zero() { return _mm256_setzero_si256(); }                            \
    VITREG_LOWP_TARGET inline V load(const std::uint32_t* p) {                                          \
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));                                 \
    }                                                                                                   \
    VITREG_LOWP_TARGET inline V broadcast(std::uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); } \
    VITREG_LOWP_TARGET inline V prep_a(V a) { return a; }                                               \
    VITREG_LOWP_TARGET inline V prep_b(V b) { return b; }                                               \
    VITREG_LOWP_TARGET inline VAcc step(VAcc acc, V a, V b) { return DOT(acc, a, b); }                  \
    VITREG_LOWP_TARGET inline void store(std::int32_t* o, VAcc v) {                                     \
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), v);                                          \
    }

#define VITREG_LOWP_TARGET __attribute__((target("avx512f,avx512vl,avx512vnni")))
VITREG_INT8_256(int8_avx256vnni_evex, _mm256_dpbusd_epi32, 6)
#include "gemm_lowp_tile.inc"
}  // namespace int8_avx256vnni_evex
#undef VITREG_LOWP_TARGET

#define VITREG_LOWP_TARGET __attribute__((target("avx2,avxvnni")))
VITREG_INT8_256(int8_avx256vnni_vex, _mm256_dpbusd_avx_epi32, 6)
#include "gemm_lowp_tile.inc"
}  // namespace int8_avx256vnni_vex
#undef VITREG_LOWP_TARGET

// int8 without a dot-product instruction, W bits wide (see Int8Isa): uint8 A zero-extended and
// int8 B sign-extended to 16 bits, even and odd bytes apart, then vpmaddwd.
#define VITREG_INT8_MADDWD(NS, W, NV, MR)                                                                   \
    namespace NS {                                                                                         \
    using V = __m##W##i;                                                                                   \
    using VAcc = __m##W##i;                                                                                \
    using Acc = std::int32_t;                                                                              \
    constexpr int kLanes = W / 32, kNv = NV, kMr = MR;                                                     \
    struct Bytes {                                                                                         \
        V even, odd; /* bytes 0, 2 and 1, 3 of each group, widened to 16 bits */                           \
    };                                                                                                     \
    VITREG_LOWP_TARGET inline VAcc zero() { return _mm##W##_setzero_si##W(); }                             \
    VITREG_LOWP_TARGET inline V load(const std::uint32_t* p) {                                             \
        return _mm##W##_loadu_si##W(reinterpret_cast<const V*>(p));                                        \
    }                                                                                                      \
    VITREG_LOWP_TARGET inline V broadcast(std::uint32_t x) { return _mm##W##_set1_epi32(static_cast<int>(x)); } \
    VITREG_LOWP_TARGET inline Bytes prep_a(V a) {                                                          \
        return {_mm##W##_and_si##W(a, _mm##W##_set1_epi16(0x00ff)), _mm##W##_srli_epi16(a, 8)};            \
    }                                                                                                      \
    VITREG_LOWP_TARGET inline Bytes prep_b(V b) {                                                          \
        return {_mm##W##_srai_epi16(_mm##W##_slli_epi16(b, 8), 8), _mm##W##_srai_epi16(b, 8)};             \
    }                                                                                                      \
    VITREG_LOWP_TARGET inline VAcc step(VAcc acc, Bytes a, Bytes b) {                                      \
        return _mm##W##_add_epi32(acc, _mm##W##_add_epi32(_mm##W##_madd_epi16(a.even, b.even),             \
                                                          _mm##W##_madd_epi16(a.odd, b.odd)));             \
    }                                                                                                      \
    VITREG_LOWP_TARGET inline void store(std::int32_t* o, VAcc v) { _mm##W##_storeu_si##W(reinterpret_cast<V*>(o), v); }

#define VITREG_LOWP_TARGET __attribute__((target("avx512f,avx512bw")))
VITREG_INT8_MADDWD(int8_avx512, 512, 3, 8)
#include "gemm_lowp_tile.inc"
}  // namespace int8_avx512
#undef VITREG_LOWP_TARGET

#define VITREG_LOWP_TARGET __attribute__((target("avx2")))
VITREG_INT8_MADDWD(int8_avx2, 256, 2, 4)
#include "gemm_lowp_tile.inc"
}  // namespace int8_avx2

// 7-bit weights without VNNI: vpmaddubsw sums the two u8 × s8 products of each byte pair into
// 16 bits (|255·63·2| < 2^15: never saturated), vpmaddwd by ones sums the pairs of a group into
// 32 bits: vpdpbusd's integers in three instructions. Four rows: the ones and the 16-bit
// partial sums need registers beside the accumulators.
VITREG_LOWP_TARGET inline __m256i maddubs_dot(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)));
}
VITREG_INT8_256(int8_avx2_maddubs, maddubs_dot, 4)
#include "gemm_lowp_tile.inc"
}  // namespace int8_avx2_maddubs
#undef VITREG_LOWP_TARGET
#endif

#define VITREG_LOWP_TARGET
namespace int8_portable {
using V = std::uint32_t;
using VAcc = std::int32_t;
using Acc = std::int32_t;
constexpr int kLanes = 1, kNv = 16, kMr = 4;
struct Bytes {
    std::int32_t v[4];
};
inline VAcc zero() { return 0; }
inline V load(const std::uint32_t* p) { return *p; }
inline V broadcast(std::uint32_t x) { return x; }
inline Bytes prep_a(V a) {
    return {{static_cast<std::int32_t>(a & 0xff), static_cast<std::int32_t>((a >> 8) & 0xff),
             static_cast<std::int32_t>((a >> 16) & 0xff), static_cast<std::int32_t>(a >> 24)}};
}
inline Bytes prep_b(V b) {
    return {{static_cast<std::int8_t>(b & 0xff), static_cast<std::int8_t>((b >> 8) & 0xff),
             static_cast<std::int8_t>((b >> 16) & 0xff), static_cast<std::int8_t>(b >> 24)}};
}
inline VAcc step(VAcc acc, const Bytes& a, const Bytes& b) {
    return acc + a.v[0] * b.v[0] + a.v[1] * b.v[1] + a.v[2] * b.v[2] + a.v[3] * b.v[3];
}
inline void store(std::int32_t* o, VAcc v) { *o = v; }
#include "gemm_lowp_tile.inc"
}  // namespace int8_portable
#undef VITREG_LOWP_TARGET

// ---- AMX: tdpbusd (int8) and tdpbf16ps (bf16) on tiles -----------------------------------
// C is computed 32 × 32 at a time in four 16 × 16 32-bit tiles (0–3), from two tiles of A's rows
// (4, 5: 16 rows × 64 bytes, 16 groups along k) and two of B (6, 7: 16 groups × 16 columns).
// B's panels [panel_groups][32] hold each tile's rows 128 bytes apart; A is read in place, or
// copied with its rows padded to whole tiles (a last strip under 32 rows, or groups not a
// multiple of 16). tdpbusd's integers are vpdpbusd's; tdpbf16ps rounds its sums otherwise than
// vdpbf16ps (test_gemm_lowp: within the same bound, not bit for bit).
namespace {
constexpr int kAmxRows = 32, kAmxCols = 32, kAmxGroups = 16;

// A packed B's panel width and rows for its kernel: AMX's 32 columns and k in whole tiles, else
// the vector kernel's own width and k as it is.
template <class Packed>
void set_panel_shape(Packed& p, bool amx, int vector_nr) {
    p.nr = amx ? kAmxCols : vector_nr;
    p.panel_groups = amx ? (p.groups() + kAmxGroups - 1) / kAmxGroups * kAmxGroups : p.groups();
}
}  // namespace
#if defined(__x86_64__)
namespace amx_kernel {

// Acc std::int32_t: tdpbusd (uint8 A, int8 B); float: tdpbf16ps.
template <class Acc, class Finish>
VITREG_AMX_TARGET void drive(const std::uint32_t* a, int m, int groups, const GroupBuffer& data, int stride, int c0,
                             int c1, const Finish& finish) {
    vitreg::amx::configure();
    const int chunks = stride / kAmxGroups;
    alignas(64) Acc acc[kAmxRows * kAmxCols];
    static thread_local GroupBuffer strip;
    for (int r = 0; r < m; r += kAmxRows) {
        const int rows = std::min(kAmxRows, m - r);
        const std::uint32_t* ap = a + static_cast<std::size_t>(r) * groups;
        long lda = groups;
        if (rows < kAmxRows || stride != groups) {
            std::uint32_t* dst = at_least(strip, static_cast<std::size_t>(kAmxRows) * stride);
            for (int i = 0; i < kAmxRows; ++i) {
                std::uint32_t* row = dst + static_cast<std::size_t>(i) * stride;
                const std::uint32_t* from = ap + static_cast<std::size_t>(i) * groups;
                if (i < rows) std::copy(from, from + groups, row);
                std::fill(row + (i < rows ? groups : 0), row + stride, 0u);  // zeros: rows past m, groups past k
            }
            ap = dst;
            lda = stride;
        }
        const long a_bytes = 4 * lda;
        for (int col = c0; col < c1; col += kAmxCols) {
            const std::uint32_t* panel = data.data() + static_cast<std::size_t>(col / kAmxCols) * stride * kAmxCols;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int ch = 0; ch < chunks; ++ch) {
                const std::uint32_t* at = ap + ch * kAmxGroups;
                const std::uint32_t* bt = panel + static_cast<std::size_t>(ch) * kAmxGroups * kAmxCols;
                _tile_loadd(4, at, a_bytes);
                _tile_loadd(5, at + 16 * lda, a_bytes);
                _tile_loadd(6, bt, 4 * kAmxCols);
                _tile_loadd(7, bt + 16, 4 * kAmxCols);
                vitreg::amx::products<std::is_same_v<Acc, float>>();
            }
            _tile_stored(0, acc, 4 * kAmxCols);
            _tile_stored(1, acc + 16, 4 * kAmxCols);
            _tile_stored(2, acc + 16 * kAmxCols, 4 * kAmxCols);
            _tile_stored(3, acc + 16 * kAmxCols + 16, 4 * kAmxCols);
            finish(r, rows, col, std::min(kAmxCols, c1 - col), acc, kAmxCols);
        }
    }
    _tile_release();
}

}  // namespace amx_kernel
#endif

namespace {

// The int8 kernel VITREG_INT8_ISA names (to measure or test one path; `forced`), else the
// fastest one the usable features (cpu.hpp) run.
struct Int8Choice {
    Int8Isa isa;
    bool forced;
};

Int8Choice choose_int8() {
    const cpu::Features& f = cpu::usable();
    const char* env = std::getenv("VITREG_INT8_ISA");
    if (env && *env) {
        for (Int8Isa isa : {Int8Isa::Amx, Int8Isa::Avx512Vnni, Int8Isa::Avx256Vnni, Int8Isa::Avx512, Int8Isa::Avx2, Int8Isa::Avx2Maddubs,
                            Int8Isa::Portable})
            if (!std::strcmp(env, to_id(isa))) {
                if (!supported(isa))
                    throw Error(std::string("VITREG_INT8_ISA=") + env + ": not available on this CPU" +
                                (cpu::level() != cpu::Level::Avx512 ? " under VITREG_ISA=" + std::string(cpu::to_string(cpu::level())) : std::string()));
                return {isa, true};
            }
        throw Error(std::string("VITREG_INT8_ISA='") + env +
                    "' is not an int8 kernel (amx, avx512-vnni, avx-vnni, avx512, avx2, avx2-maddubs or portable)");
    }
    if (f.amx_int8) return {Int8Isa::Amx, false};
    if (f.avx512_vnni) return {Int8Isa::Avx512Vnni, false};
    if (f.avx_vnni) return {Int8Isa::Avx256Vnni, false};
    if (f.avx512) return {Int8Isa::Avx512, false};
    if (f.avx2_fma) return {Int8Isa::Avx2, false};
    return {Int8Isa::Portable, false};
}

const Int8Choice& int8_choice() {
    static const Int8Choice c = choose_int8();  // a throw leaves it unset: the next call throws again
    return c;
}

Tiles tiles(Bf16Isa isa) {
    switch (isa) {
#if defined(__x86_64__)
        case Bf16Isa::Avx512Bf16: return AsmTiles<Mac::Bf16Dot, 3>::kernels;
#endif
        default: return bf16_portable::kernels;
    }
}

// The tiles of a panel `nr` wide: a narrow last panel's, else the kernel's own.
Tiles tiles(Bf16Isa isa, int nr) {
#if defined(__x86_64__)
    if (isa == Bf16Isa::Avx512Bf16 && nr == 16) return AsmTiles<Mac::Bf16Dot, 1>::kernels;
    if (isa == Bf16Isa::Avx512Bf16 && nr == 32) return AsmTiles<Mac::Bf16Dot, 2>::kernels;
#endif
    return tiles(isa);
}

Tiles tiles(Int8Isa isa) {
    switch (isa) {
#if defined(__x86_64__)
        case Int8Isa::Avx512Vnni: return AsmTiles<Mac::Int8Dot, 3>::kernels;
        case Int8Isa::Avx256Vnni: return cpu::usable().avx512_vnni ? int8_avx256vnni_evex::kernels
                                                                   : int8_avx256vnni_vex::kernels;
        case Int8Isa::Avx512: return int8_avx512::kernels;
        case Int8Isa::Avx2: return int8_avx2::kernels;
        case Int8Isa::Avx2Maddubs: return int8_avx2_maddubs::kernels;
#endif
        default: return int8_portable::kernels;
    }
}

// Fills `panels` with B's groups: group(p, col) for p < groups, col < n; zero beyond n.
template <class Group>
void pack_groups(GroupBuffer& data, int groups, int n, int nr, Group group) {
    const int panels = (n + nr - 1) / nr;
    data.assign(static_cast<std::size_t>(panels) * groups * nr, 0u);
    parallel_each(panels, [&](int panel) {
        std::uint32_t* dst = data.data() + static_cast<std::size_t>(panel) * groups * nr;
        const int j0 = panel * nr, jn = std::min(nr, n - j0);
        for (int p = 0; p < groups; ++p)
            for (int j = 0; j < jn; ++j) dst[static_cast<std::size_t>(p) * nr + j] = group(p, j0 + j);
    });
}

// Runs the tiles over C[0:m, c0:c1] and hands each tile's accumulators to
// finish(row, rows, col, cols, accumulators [rows][nr]).
// Panel p starts at p · groups · t.nr; the last one (panel `last`) may be narrower, with tiles of
// its own (`tail`).
template <class Acc, class Finish>
void drive(const std::uint32_t* a, long lda, int m, const GroupBuffer& data, int groups, Tiles t, int last, Tiles tail,
           int c0, int c1, const Finish& finish) {
    alignas(64) Acc acc[kMaxTile];
    for (int col = c0; col < c1;) {
        const Tiles& k = col / t.nr == last ? tail : t;
        const std::uint32_t* panel = data.data() + static_cast<std::size_t>(col / t.nr) * groups * t.nr;
        const int cols = std::min(k.nr, c1 - col);
        for (int r = 0; r < m; r += k.mr) {
            const int rows = std::min(k.mr, m - r);
            k.tiles[rows - 1](a + r * lda, lda, panel, groups, acc);
            finish(r, rows, col, cols, acc, k.nr);
        }
        col += k.nr;
    }
}

}  // namespace

// ---- bf16 ----------------------------------------------------------------------------------

namespace {
// vdpbf16ps where it runs at the FMA's rate (cpu::Features), or where VITREG_BF16_ISA asks.
Bf16Isa choose_bf16() {
    const cpu::Features& f = cpu::usable();
    const char* env = std::getenv("VITREG_BF16_ISA");
    if (env && *env) {
        if (!std::strcmp(env, "fp32")) return Bf16Isa::Portable;
        const Bf16Isa isa = !std::strcmp(env, "amx") ? Bf16Isa::Amx : Bf16Isa::Avx512Bf16;
        if (isa == Bf16Isa::Avx512Bf16 && std::strcmp(env, "avx512-bf16"))
            throw Error(std::string("VITREG_BF16_ISA='") + env + "' is not a bf16 kernel (amx, avx512-bf16 or fp32)");
        if (!supported(isa)) throw Error(std::string("VITREG_BF16_ISA=") + env + ": not available on this CPU");
        return isa;
    }
    if (f.amx_bf16) return Bf16Isa::Amx;
    return f.bf16_dot_full_rate ? Bf16Isa::Avx512Bf16 : Bf16Isa::Portable;
}
}  // namespace

Bf16Isa best_bf16() {
    static const Bf16Isa isa = choose_bf16();  // a throw leaves it unset: the next call throws again
    return isa;
}

bool supported(Bf16Isa isa) {
    switch (isa) {
        case Bf16Isa::Amx: return cpu::usable().amx_bf16;
        case Bf16Isa::Avx512Bf16: return cpu::usable().avx512_bf16;
        case Bf16Isa::Portable: return true;
    }
    return false;
}

const char* to_string(Bf16Isa isa) {
    return isa == Bf16Isa::Amx ? "amx-bf16 (tiles)" : isa == Bf16Isa::Avx512Bf16 ? "avx512-bf16" : "portable";
}

namespace {
// p's shape and kernel, and its panels zeroed (the padding the kernels multiply by).
std::uint32_t* start_bf16_panels(PackedBf16& p, int k, int n, Bf16Isa isa) {
    p.k = k;
    p.n = n;
    p.isa = supported(isa) ? isa : best_bf16();
    set_panel_shape(p, p.isa == Bf16Isa::Amx, tiles(p.isa).nr);
    const int panels = p.panels(), rest = n - (panels - 1) * p.nr;  // the last panel's columns
    p.last_nr = p.isa != Bf16Isa::Avx512Bf16 ? p.nr : rest <= 16 ? 16 : rest <= 32 ? 32 : p.nr;
    p.data.resize(n > 0 ? p.offset(panels - 1) + static_cast<std::size_t>(p.panel_groups) * p.last_nr : 0);
    // The packers write every value; only the padding is zeroed here, not the whole buffer, which
    // attention's keys and values reuse at every layer: AMX's rows past k's groups, and the last
    // panel's columns past n.
    const bool padded_rows = p.panel_groups > p.groups();
    for (int panel = padded_rows ? 0 : std::max(0, panels - 1); panel < panels; ++panel) {
        const int width = p.width(panel), used = panel == panels - 1 ? rest : width;
        std::uint32_t* dst = p.data.data() + p.offset(panel);
        for (int g = 0; g < p.panel_groups; ++g)
            std::fill(dst + static_cast<std::size_t>(g) * width + (g < p.groups() ? used : 0),
                      dst + static_cast<std::size_t>(g + 1) * width, 0u);
    }
    return p.data.data();
}
}  // namespace

// Row pairs (2g, 2g + 1) of B, panel row by panel row: attention's values, per layer.
void pack_into(PackedBf16& into, const float* b, int k, int n, long ldb, Bf16Isa isa) {
    std::uint32_t* data = start_bf16_panels(into, k, n, isa);
    const loops::Table& vec = loops::active();
    for (int panel = 0; panel < into.panels(); ++panel) {
        const int j0 = panel * into.nr, jn = std::min(into.nr, n - j0), width = into.width(panel);
        std::uint32_t* dst = data + into.offset(panel);
        for (int g = 0; g < into.groups(); ++g)
            vec.bf16_interleave(b + 2 * g * ldb + j0, 2 * g + 1 < k ? b + (2 * g + 1) * ldb + j0 : nullptr, jn,
                                dst + static_cast<std::size_t>(g) * width);
    }
}

namespace {
// Columns [c0, c1) of B = scale · Tᵀ into p's panels (shaped and zeroed): each row of T scaled
// and paired along k, 16 rows at a time, and the block transposed down its panel's columns (a
// word at a time, the keys' packing had taken 1.4% of an int8 ViT-L forward). Columns are
// independent, so any split of them gives the same bits.
void pack_transposed_columns(PackedBf16& p, const float* t, long ldt, float scale, int c0, int c1) {
    constexpr int kBlock = 16;
    const loops::Table& vec = loops::active();
    static thread_local std::vector<float> scaled;
    static thread_local GroupBuffer pairs;
    const int groups = p.groups();
    scaled.resize(static_cast<std::size_t>(p.k));
    std::uint32_t* words = at_least(pairs, static_cast<std::size_t>(kBlock) * groups);  // [kBlock][groups]
    for (int col = c0; col < c1;) {
        const int panel = col / p.nr, n = std::min({kBlock, c1 - col, (panel + 1) * p.nr - col});
        for (int j = 0; j < n; ++j) {
            const float* row = t + (col + j) * ldt;
            if (scale != 1.0f) {
                for (int i = 0; i < p.k; ++i) scaled[i] = scale * row[i];
                row = scaled.data();
            }
            vec.bf16_pairs(row, p.k, words + static_cast<std::size_t>(j) * groups);
        }
        transpose32(words, groups, n, groups, p.data.data() + p.offset(panel) + col % p.nr, p.width(panel));
        col += n;
    }
}
}  // namespace

// Attention's keys, one head at a time inside a task: serial.
void pack_transposed_into(PackedBf16& into, const float* t, int n, int k, long ldt, float scale, Bf16Isa isa) {
    start_bf16_panels(into, k, n, isa);
    pack_transposed_columns(into, t, ldt, scale, 0, n);
}

// A linear layer's weights at load: panels in parallel, straight from W's rows (no transposed copy).
void pack_weights_into(PackedBf16& into, const float* w, int n, int k, Bf16Isa isa) {
    start_bf16_panels(into, k, n, isa);
    parallel_each(into.panels(), [&](int panel) {
        pack_transposed_columns(into, w, k, 1.0f, panel * into.nr, std::min(n, (panel + 1) * into.nr));
    });
}

void round_rows_bf16(const float* a, long lda, int m, int k, std::uint32_t* out) {
    const int groups = (k + 1) / 2;
    const loops::Table& vec = loops::active();
    for (int r = 0; r < m; ++r) vec.bf16_pairs(a + r * lda, k, out + static_cast<std::size_t>(r) * groups);
}

void multiply(const std::uint32_t* a, int m, const PackedBf16& b, int c0, int c1, float* c, long ldc,
              const Epilogue& e) {
    const loops::Table& vec = loops::active();
    const auto finish = [&](int r, int rows, int col, int cols, const float* y, int nr) {
        for (int i = 0; i < rows; ++i)
            vec.finish_row(y + i * nr, cols, e.bias ? e.bias + col : nullptr, e.scale ? e.scale + col : nullptr,
                           c + (r + i) * ldc + (col - c0));
    };
#if defined(__x86_64__)
    if (b.isa == Bf16Isa::Amx) return amx_kernel::drive<float>(a, m, b.groups(), b.data, b.panel_groups, c0, c1, finish);
#endif
    drive<float>(a, b.groups(), m, b.data, b.groups(), tiles(b.isa), b.panels() - 1, tiles(b.isa, b.last_nr), c0, c1,
                 finish);
}

// ---- int8 ----------------------------------------------------------------------------------

Int8Isa best_int8() { return int8_choice().isa; }

bool supported(Int8Isa isa) {
    const cpu::Features& f = cpu::usable();
    switch (isa) {
        case Int8Isa::Amx: return f.amx_int8;
        case Int8Isa::Avx512Vnni: return f.avx512_vnni;
        case Int8Isa::Avx256Vnni: return f.avx_vnni || f.avx512_vnni;
        case Int8Isa::Avx512: return f.avx512;
        case Int8Isa::Avx2: return f.avx2_fma;
        case Int8Isa::Avx2Maddubs: return f.avx2_fma;
        case Int8Isa::Portable: return true;
    }
    return false;
}

detail::LowpTiles detail::int8_tiles(Int8Isa isa) { return tiles(isa); }

Int8Isa int8_kernel(int bits) {
    const Int8Choice& c = int8_choice();
    const bool emulated = c.isa == Int8Isa::Avx512 || c.isa == Int8Isa::Avx2;
    return bits == 7 && emulated && !c.forced ? Int8Isa::Avx2Maddubs : c.isa;
}

const char* to_id(Int8Isa isa) {
    switch (isa) {
        case Int8Isa::Amx: return "amx";
        case Int8Isa::Avx512Vnni: return "avx512-vnni";
        case Int8Isa::Avx256Vnni: return "avx-vnni";
        case Int8Isa::Avx512: return "avx512";
        case Int8Isa::Avx2: return "avx2";
        case Int8Isa::Avx2Maddubs: return "avx2-maddubs";
        case Int8Isa::Portable: return "portable";
    }
    return "?";
}

const char* to_string(Int8Isa isa) {
    switch (isa) {
        case Int8Isa::Amx: return "amx-int8 (tiles)";
        case Int8Isa::Avx512Vnni: return "avx512-vnni";
        case Int8Isa::Avx256Vnni: return "avx-vnni (256-bit)";
        case Int8Isa::Avx512: return "avx512 (vnni emulated)";
        case Int8Isa::Avx2: return "avx2 (vnni emulated)";
        case Int8Isa::Avx2Maddubs: return "avx2 vpmaddubsw (7-bit weights)";
        case Int8Isa::Portable: return "portable";
    }
    return "?";
}

PackedInt8 pack_int8(const float* b, int k, int n, long ldb, Int8Isa isa, int bits) {
    const quant::Int8Weights w = quant::quantize_channels(b, n, k, 1, ldb, bits);
    return pack_int8(w.q.data(), w.scale.data(), k, n, isa, bits);
}

PackedInt8 pack_int8(const std::int8_t* q, const float* scale, int k, int n, Int8Isa isa, int bits,
                     const std::int32_t* sums) {
    if (bits != 7 && bits != 8) throw Error("int8 weights are 7 or 8 bits wide (got " + std::to_string(bits) + ")");
    PackedInt8 p;
    p.k = k;
    p.n = n;
    p.isa = supported(isa) ? isa : int8_kernel(bits);
    if (p.isa == Int8Isa::Avx2Maddubs && bits != 7)
        throw Error("the vpmaddubsw kernel is exact for 7-bit weights only (VITREG_INT8_ISA=avx2-maddubs needs "
                    "--int8-weights 7)");
    set_panel_shape(p, p.isa == Int8Isa::Amx, tiles(p.isa).nr);
    p.scale.assign(scale, scale + n);
    if (sums) {
        p.sums.assign(sums, sums + n);
    } else {
        p.sums.assign(n, 0);
        parallel_each(n, [&](int col) {
            bool in_range;  // (the caller checked)
            p.sums[col] = sum_s8(q + static_cast<std::size_t>(col) * k, static_cast<std::size_t>(k), 127, &in_range);
        });
    }
    pack_groups(p.data, p.panel_groups, n, p.nr, [&](int g, int col) {
        std::uint32_t word = 0;
        for (int i = 0; i < 4 && 4 * g + i < k; ++i)  // zero past k: the last group's and AMX's padding
            word |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(q[static_cast<std::size_t>(col) * k + 4 * g + i]))
                    << (8 * i);
        return word;
    });
    return p;
}

void quantize_rows(const float* a, long lda, int m, int k, const quant::AffineU8* fixed, std::uint32_t* out,
                   float* scale, std::int32_t* zero_point) {
    const int groups = (k + 3) / 4;
    const loops::Table& vec = loops::active();
    for (int r = 0; r < m; ++r) {
        const float* row = a + r * lda;
        quant::AffineU8 q;
        if (fixed) {
            q = *fixed;
        } else {
            float lo, hi;
            vec.range(row, k, &lo, &hi);
            q = quant::affine_u8(lo, hi);
        }
        scale[r] = q.scale;
        zero_point[r] = q.zero_point;
        auto* bytes = reinterpret_cast<std::uint8_t*>(out + static_cast<std::size_t>(r) * groups);
        vec.quantize_u8(row, k, q, bytes);
        std::fill(bytes + k, bytes + 4 * groups, std::uint8_t{0});  // B's padding is zero too
    }
}

void multiply(const QuantizedRows& a, int m, const PackedInt8& b, int c0, int c1, float* c, long ldc,
              const Epilogue& e) {
    const loops::Table& vec = loops::active();
    const auto finish = [&](int r, int rows, int col, int cols, const std::int32_t* acc, int nr) {
        vec.dequantize_rows(acc, nr, rows, cols, a.zero_point + r, a.scale + r, b.sums.data() + col,
                            b.scale.data() + col, e.bias ? e.bias + col : nullptr, e.scale ? e.scale + col : nullptr,
                            c + r * ldc + (col - c0), ldc);
    };
#if defined(__x86_64__)
    if (b.isa == Int8Isa::Amx)
        return amx_kernel::drive<std::int32_t>(a.data, m, b.groups(), b.data, b.panel_groups, c0, c1, finish);
#endif
    drive<std::int32_t>(a.data, b.groups(), m, b.data, b.groups(), tiles(b.isa), -1, tiles(b.isa), c0, c1, finish);
}

// ---- int8 weights in place -----------------------------------------------------------------

int joined_tiles(int n, int span) {
    const int tiles = (n + span - 1) / span;
    return tiles > 1 && n - (tiles - 1) * span <= 16 ? tiles - 1 : tiles;
}

void pack_rows(PackedRows& into, int m, int groups, const std::function<void(int, int, std::uint32_t*)>& make) {
    into.nr = 48;  // (the AVX-512 tiles' panel, for bf16 and int8 alike)
    into.groups = groups;
    into.n = m;
    into.count = joined_tiles(m, into.nr);
    const int rest = m - (into.count - 1) * into.nr;  // 1 .. 64
    into.last_nr = rest <= 16 ? 16 : rest <= 32 ? 32 : rest <= 48 ? 48 : 64;
    if (m == 0) return;
    into.data.resize(into.offset(into.count - 1) + static_cast<std::size_t>(groups) * into.last_nr);
    parallel_each(into.count, [&](int panel) {
        const int j0 = panel * into.nr, width = into.width(panel), used = std::min(width, m - j0);
        std::uint32_t* dst = into.data.data() + into.offset(panel);
        static thread_local GroupBuffer rows;
        std::uint32_t* made = at_least(rows, static_cast<std::size_t>(used) * groups);
        make(j0, used, made);
        transpose32(made, groups, used, groups, dst, width);
        for (int g = 0; used < width && g < groups; ++g)  // padding rows: zero, their sums unused
            std::fill(dst + static_cast<std::size_t>(g) * width + used, dst + static_cast<std::size_t>(g + 1) * width, 0u);
    });
}

#if defined(__x86_64__)
namespace {
// The in-place product with the tiles of one instruction: 48 columns, and the last panel's.
template <Mac OP, class Acc>
void multiply_rows_with(const std::uint32_t* w, int on, const PackedRows& x, int c0, int c1, Acc* out, long ldo) {
    const Tiles full = AsmTiles<OP, 3>::kernels;
    const Tiles tail = x.last_nr == 16   ? AsmTiles<OP, 1>::kernels
                       : x.last_nr == 32 ? AsmTiles<OP, 2>::kernels
                       : x.last_nr == 64 ? AsmTiles<OP, 4>::kernels
                                         : full;
    if (x.nr != full.nr) throw Error("in-place input packed for another kernel");
    const auto finish = [&](int r, int rows, int col, int cols, const Acc* acc, int nr) {
        for (int i = 0; i < rows; ++i)
            std::memcpy(out + (r + i) * ldo + (col - c0), acc + i * nr, static_cast<std::size_t>(cols) * sizeof(Acc));
    };
    drive<Acc>(w, x.groups, on, x.data, x.groups, full, x.panels() - 1, tail, c0, c1, finish);
}
}  // namespace

void multiply_rows(const std::uint32_t* w, int on, const PackedRows& x, int c0, int c1, float* out, long ldo) {
    multiply_rows_with<Mac::Bf16Dot>(w, on, x, c0, c1, out, ldo);
}

void multiply_rows(const std::uint32_t* w, int on, const PackedRows& x, int c0, int c1, std::int32_t* out, long ldo) {
    multiply_rows_with<Mac::Int8DotSigned>(w, on, x, c0, c1, out, ldo);
}
#else
void multiply_rows(const std::uint32_t*, int, const PackedRows&, int, int, float*, long) {
    throw Error("weights in place need AVX-512");
}

void multiply_rows(const std::uint32_t*, int, const PackedRows&, int, int, std::int32_t*, long) {
    throw Error("weights in place need AVX-512");
}
#endif

namespace {
#if defined(__x86_64__)
// The eight 64-bit lanes of vpsadbw's sums, added.
__attribute__((target("avx512f"))) std::int64_t lanes_total(__m512i sums) {
    alignas(64) std::int64_t lanes[8];  // (GCC 12 warns of _mm512_reduce_add_epi64's own temporaries)
    _mm512_store_si512(lanes, sums);
    std::int64_t total = 0;
    for (const std::int64_t lane : lanes) total += lane;
    return total;
}

// 64 bytes a step through vpsadbw; `i` returns where the whole steps end.
__attribute__((target("avx512f,avx512bw"))) std::int64_t sum_u8_avx512(const std::uint8_t* bytes, std::size_t n,
                                                                      std::size_t* i) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i sums = zero;
    for (*i = 0; *i + 64 <= n; *i += 64)
        sums = _mm512_add_epi64(sums, _mm512_sad_epu8(_mm512_loadu_si512(bytes + *i), zero));
    return lanes_total(sums);
}

// 64 bytes a step: the sum through vpsadbw of the bytes offset to unsigned, the range by their
// extremes.
__attribute__((target("avx512f,avx512bw"))) std::int32_t sum_s8_avx512(const std::int8_t* q, std::size_t n, int* lo,
                                                                      int* hi) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
    __m512i sums = zero, low = zero, high = zero;
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i v = _mm512_loadu_si512(q + i);
        sums = _mm512_add_epi64(sums, _mm512_sad_epu8(_mm512_xor_si512(v, flip), zero));
        low = _mm512_min_epi8(low, v);
        high = _mm512_max_epi8(high, v);
    }
    alignas(64) std::int8_t l[64], h[64];
    _mm512_store_si512(l, low);
    _mm512_store_si512(h, high);
    std::int64_t total = lanes_total(sums) - 128 * static_cast<std::int64_t>(i);
    for (int j = 0; j < 64; ++j) {
        *lo = std::min<int>(*lo, l[j]);
        *hi = std::max<int>(*hi, h[j]);
    }
    for (; i < n; ++i) {
        total += q[i];
        *lo = std::min<int>(*lo, q[i]);
        *hi = std::max<int>(*hi, q[i]);
    }
    return static_cast<std::int32_t>(total);
}
#endif
}  // namespace

std::int32_t sum_s8(const std::int8_t* q, std::size_t n, int qmax, bool* in_range) {
    int lo = 0, hi = 0;
    std::int32_t total = 0;
#if defined(__x86_64__)
    if (cpu::usable().avx512) {
        total = sum_s8_avx512(q, n, &lo, &hi);
    } else
#endif
    {
        for (std::size_t i = 0; i < n; ++i) {
            total += q[i];
            lo = std::min<int>(lo, q[i]);
            hi = std::max<int>(hi, q[i]);
        }
    }
    *in_range = lo >= -qmax && hi <= qmax;
    return total;
}

std::int32_t sum_u8(const std::uint8_t* bytes, std::size_t n) {
    std::int64_t total = 0;
    std::size_t i = 0;
#if defined(__x86_64__)
    if (cpu::usable().avx512) total = sum_u8_avx512(bytes, n, &i);
#endif
    for (; i < n; ++i) total += bytes[i];
    return static_cast<std::int32_t>(total);
}

}  // namespace vitreg::gemm
