#pragma once
// Reduced-precision GEMMs over weights packed once (docs/design.md, "Reduced precision"), the bf16
// and int8 siblings of gemm.hpp's SGEMM, with the same fused epilogue.
//
// bf16: A and B rounded to bf16 (nearest even), products accumulated in fp32 two k at a time,
// odd k first, exactly as AVX512-BF16's vdpbf16ps does; the portable kernel replays that order
// (the products of two bf16 are exact in fp32), the same bits up to vdpbf16ps' flushing of
// denormals. A CPU without vdpbf16ps runs bf16 faster through the fp32 kernels on bf16-rounded
// operands (gemm.hpp's pack_into(..., bf16)): the same products, summed in k order.
// int8 (W8A8): A is uint8 with a per-row scale and zero point, B int8 with a per-column scale;
// C = (Σ a·b − zp_row · Σ_k b) · scale_row · scale_col, accumulated in int32: every kernel
// gives the same integers, and the same floats up to the order of the epilogue's two products.
//
// Operands are 32-bit groups along k (two bf16, or four 8-bit values), the unit vdpbf16ps and
// vpdpbusd consume: A is [m][groups] row-major, B panels of [groups][nr]. Kernels are chosen
// at run time; a CPU without the instructions runs the same numbers through emulation.
#include <cstdint>
#include <functional>
#include <vector>

#include "gemm.hpp"
#include "quantize.hpp"

namespace vitreg::gemm {

using GroupBuffer = std::vector<std::uint32_t, AlignedAllocator<std::uint32_t>>;

// ---- bf16 ---------------------------------------------------------------------------------
enum class Bf16Isa { Amx, Avx512Bf16, Portable };
// Amx (tdpbf16ps on tiles) where the CPU has AMX-BF16; else Avx512Bf16 where vdpbf16ps runs at
// the FMA's rate; VITREG_BF16_ISA=amx|avx512-bf16|fp32 asks for one; else Portable (and bf16
// linears and attention run rounded operands through the fp32 kernels).
Bf16Isa best_bf16();
bool supported(Bf16Isa isa);
// Whether the forward's bf16 runs on bf16 instructions (else on rounded operands through the fp32 kernels).
inline bool native_bf16() { return best_bf16() != Bf16Isa::Portable; }
// Whether bf16 weights can run where they lie in the file (kernels.hpp, Linear::mapped; see
// "weights in place" below): on vdpbf16ps. AMX's tiles take A in strips of 32 rows and copy a
// strip that ends short, which a block of W's rows would do at every call; there they are packed.
inline bool bf16_in_place() { return best_bf16() == Bf16Isa::Avx512Bf16; }
const char* to_string(Bf16Isa isa);

struct PackedBf16 {
    int k = 0, n = 0, nr = 0;
    int panel_groups = 0;  // a panel's rows: groups(), rounded up to AMX's 16 for Amx
    int last_nr = 0;       // the last panel's width: nr, or 16 or 32 where AVX512-BF16's tail is that narrow
    Bf16Isa isa = Bf16Isa::Portable;
    GroupBuffer data;  // ceil(n / nr) panels of [panel_groups][width(p)] pairs, zero-padded
    int groups() const { return (k + 1) / 2; }
    int panels() const { return (n + nr - 1) / nr; }
    int width(int panel) const { return panel == panels() - 1 ? last_nr : nr; }
    std::size_t offset(int panel) const { return static_cast<std::size_t>(panel) * panel_groups * nr; }
};

// B [k, n] row-major (stride ldb), rounded to bf16 and packed.
void pack_into(PackedBf16& into, const float* b, int k, int n, long ldb, Bf16Isa isa = best_bf16());
// B = scale · Tᵀ for T [n, k] (stride ldt): attention's keys, scale a power of two.
void pack_transposed_into(PackedBf16& into, const float* t, int n, int k, long ldt, float scale,
                          Bf16Isa isa = best_bf16());
// B = Wᵀ for a linear layer's W [n, k] (row-major), packed in parallel at load: the same bits as
// pack_into of the transposed copy.
void pack_weights_into(PackedBf16& into, const float* w, int n, int k, Bf16Isa isa = best_bf16());
// A [m, k] (stride lda) rounded to bf16 pairs: out is [m][ceil(k / 2)].
void round_rows_bf16(const float* a, long lda, int m, int k, std::uint32_t* out);

// C[0:m, c0:c1] = epilogue(A · B[:, c0:c1]); a from round_rows_bf16 (row stride b.groups()).
void multiply(const std::uint32_t* a, int m, const PackedBf16& b, int c0, int c1, float* c, long ldc,
              const Epilogue& epilogue = {});

// ---- int8 ---------------------------------------------------------------------------------
// Amx: AMX's tdpbusd on 16 × 64-byte tiles, 32 × 32 of C per step. Avx512Vnni: vpdpbusd on 512 bits. Avx256Vnni: vpdpbusd on 256 bits (AVX-VNNI, or AVX512-VNNI
// with VL). Avx512 / Avx2: vpmaddwd on the bytes widened to 16 bits — exact, where vpmaddubsw
// would saturate 255·127·2. Avx2Maddubs: vpmaddubsw, then vpmaddwd by ones, for 7-bit weights
// only (255·63·2 fits in 16 bits, so it is exact too). Portable: C++.
enum class Int8Isa { Amx, Avx512Vnni, Avx256Vnni, Avx512, Avx2, Avx2Maddubs, Portable };
// The fastest kernel for 8-bit weights that cpu::usable() runs, or the one VITREG_INT8_ISA names
// (its to_id).
Int8Isa best_int8();
// The kernel for weights of `bits` (8 or 7): best_int8(), except that 7-bit weights run
// vpmaddubsw on an AVX2 CPU whose int8 kernel would otherwise be an emulation.
Int8Isa int8_kernel(int bits);
bool supported(Int8Isa isa);
const char* to_string(Int8Isa isa);
const char* to_id(Int8Isa isa);  // "amx", "avx512-vnni", "avx-vnni", "avx512", "avx2", "portable"

struct PackedInt8 {
    int k = 0, n = 0, nr = 0;
    int panel_groups = 0;             // a panel's rows: groups(), rounded up to AMX's 16 for Amx
    Int8Isa isa = Int8Isa::Portable;
    GroupBuffer data;                 // ceil(n / nr) panels of [panel_groups][nr] quads of int8
    std::vector<float> scale;         // [n] per output column: max|w| / (2^(bits−1) − 1)
    std::vector<std::int32_t> sums;   // [n] Σ_k q[k, n], for the activation zero point's term
    int groups() const { return (k + 3) / 4; }
    int panels() const { return (n + nr - 1) / nr; }
};

// Quantizes B [k, n] (stride ldb) symmetric per column to `bits` (quantize_channels over its
// columns, quant::quantize_channels) and packs it. Avx2Maddubs takes 7-bit weights only.
PackedInt8 pack_int8(const float* b, int k, int n, long ldb, Int8Isa isa = best_int8(), int bits = 8);
// Packs weights quantized already: q [n][k] (Bᵀ: row col holds column col of B, the layout of a
// linear's W [out, in]), within ±(2^(bits−1) − 1), with their `scale` [n]; `sums` [n], each row's
// Σ q where the caller has them already (a quantized file's, found as it was checked).
PackedInt8 pack_int8(const std::int8_t* q, const float* scale, int k, int n, Int8Isa isa = best_int8(), int bits = 8,
                     const std::int32_t* sums = nullptr);

// A's rows quantized to uint8: out [m][ceil(k / 4)] groups, one scale and zero point per row.
struct QuantizedRows {
    const std::uint32_t* data = nullptr;
    const float* scale = nullptr;            // [m]
    const std::int32_t* zero_point = nullptr;  // [m]
    const std::int32_t* group_terms = nullptr;  // int4: [m][ceil(k / kInt4Group)] (int4_row_terms)
};

// Quantizes A [m, k] (stride lda) into `out` [m][ceil(k / 4)] groups (the padding zero) with
// the mapping `fixed` (per tensor) or, when null, each row's own range (per token).
void quantize_rows(const float* a, long lda, int m, int k, const quant::AffineU8* fixed, std::uint32_t* out,
                   float* scale, std::int32_t* zero_point);

// C[0:m, c0:c1] = epilogue(dequantized A · B[:, c0:c1]).
void multiply(const QuantizedRows& a, int m, const PackedInt8& b, int c0, int c1, float* c, long ldc,
              const Epilogue& epilogue = {});

// ---- weights in place (kernels.hpp, Linear::mapped) ------------------------------------------
// W [n][k] read where it lies in the file, bf16 pairs or an int8 file's bytes: W's rows are the
// side the kernel broadcasts (for vpdpbusd the signed one), and the input's rows, as
// round_rows_bf16 or quantize_rows make them and packed as panels at each call, the side it
// loads (for vpdpbusd unsigned). A tile holds W·Aᵀ: vdpbf16ps' products commute and vpdpbusd's
// sums are exact integers, so it is the packed path's tile transposed, bit for bit. Not where
// AMX runs the precision (its tiles would copy a short strip of W at every call).
inline bool int8_in_place() { return best_int8() == Int8Isa::Avx512Vnni; }

// A last panel of 16 columns or fewer after a full one joins it, 64 wide: the 16-wide tiles (one
// vector, 8 rows) run below the others' rate, and 201 tokens would spend 8% of the time there.
struct PackedRows {
    int groups = 0, n = 0, nr = 0, last_nr = 0;  // the last panel 16, 32, nr or 64 wide
    int count = 0;
    GroupBuffer data;  // `count` panels of [groups][width(p)] 32-bit words, zero-padded
    int panels() const { return count; }
    int width(int panel) const { return panel == panels() - 1 ? last_nr : nr; }
    std::size_t offset(int panel) const { return static_cast<std::size_t>(panel) * groups * nr; }
};
// How many tiles of `span` cover n when a last one of 16 or fewer joins the one before it (its
// few rows would otherwise run a whole tile's k loop): 201 tokens in 48s are 48, 48, 48 and 57.
int joined_tiles(int n, int span);
// Rows [m][groups] of 32-bit words as the panels the in-place kernels load: make(r0, rn, out)
// writes rows r0 .. r0 + rn into out (row stride groups) and runs inside the panel's task, so
// the rows are made and laid out in one parallel step.
void pack_rows(PackedRows& into, int m, int groups, const std::function<void(int, int, std::uint32_t*)>& make);
// out [on][c1 − c0] (stride ldo) = W's rows w [on][x.groups] against the rows c0 .. c1 of x (c0 a
// multiple of x.nr): bf16 pairs into fp32 sums, or int8 quads against uint8 into int32 sums.
void multiply_rows(const std::uint32_t* w, int on, const PackedRows& x, int c0, int c1, float* out, long ldo);
void multiply_rows(const std::uint32_t* w, int on, const PackedRows& x, int c0, int c1, std::int32_t* out, long ldo);
// Σ q over n int8 values (the zero point's term), and whether every |q| ≤ qmax, in one pass.
std::int32_t sum_s8(const std::int8_t* q, std::size_t n, int qmax, bool* in_range);
// Σ over n uint8 values (n < 2^23: the sum fits an int32), through vpsadbw where the CPU has AVX-512.
std::int32_t sum_u8(const std::uint8_t* bytes, std::size_t n);

// ---- int4 weights (W4A8) --------------------------------------------------------------------
// Weights affine per group of quant::kInt4Group along k (quantize.hpp's affine_u4), held as
// 4-bit codes; activations uint8 per row as for int8. A panel's codes are unpacked to int8
// (q − 8, in [−8, 7]) once per column panel and run through the int8 tiles one group of k at
// a time: each group's exact int32 sums are scaled and summed in fp32,
// C = sa · (Σ_g [scale_g · Σ u·(q − 8) + zero_g · Σ (u − zp)] − zp · Σ_g scale_g · Σ (q − 8)).
// The int8 kernel of 7-bit weights runs them (|q − 8| ≤ 8 never saturates vpmaddubsw), except
// that AMX's tiles give way to AVX512-VNNI (a group is two of its 16-group chunks), where a
// kernel of its own keeps the fp32 sums in registers across the groups.
Int8Isa int4_kernel();

struct PackedInt4 {
    int k = 0, n = 0, nr = 0;
    Int8Isa isa = Int8Isa::Portable;
    // ceil(n / nr) panels of [groups()][nr] 16-bit words, the codes of k = 4g .. 4g + 3 from the
    // low nibble up; the padding code 8 (weight 0).
    std::vector<std::uint16_t, AlignedAllocator<std::uint16_t>> data;
    std::vector<std::uint16_t> scale, zero;  // [blocks()][n] bf16
    std::vector<std::int16_t> sums;          // [blocks()][n] Σ (q − 8) over the group
    int groups() const { return (k + 3) / 4; }
    int blocks() const { return (k + quant::kInt4Group - 1) / quant::kInt4Group; }
    int panels() const { return (n + nr - 1) / nr; }
};

// Quantizes B [k, n] (stride ldb) to int4, group by group down each column, and packs it. A last
// group shorter than kInt4Group (k not a multiple) is a group of its own.
PackedInt4 pack_int4(const float* b, int k, int n, long ldb, Int8Isa isa = int4_kernel());
// Packs weights quantized already (quant::Int4Weights' layout, a linear's W [out, in] = Bᵀ):
// codes [n][int4_row_bytes(k)], scale and zero [n][int4_groups(k)] bf16.
PackedInt4 pack_int4(const std::uint8_t* codes, const std::uint16_t* scale, const std::uint16_t* zero, int k, int n,
                     Int8Isa isa = int4_kernel());
// The weights the codes stand for, [k][n] row-major (quantize.hpp's dequantize_u4).
std::vector<float> dequantize(const PackedInt4& b);
// What the int4 GEMM needs of A beside its bytes: Σ (u − zp) over each group of k of each of its m
// rows (data, zero_point), into out [m][ceil(k / kInt4Group)]; once per linear, not per panel.
void int4_row_terms(const QuantizedRows& a, int m, int k, std::int32_t* out);

// C[0:m, c0:c1] = epilogue(dequantized A · dequantized B[:, c0:c1]); a.group_terms set.
void multiply(const QuantizedRows& a, int m, const PackedInt4& b, int c0, int c1, float* c, long ldc,
              const Epilogue& epilogue = {});

// int4 weights in place (kernels.hpp, Linear::mapped: an int4 file's codes on AVX512-VNNI, as
// int8_in_place): each row's Σ_g scale_g · Σ (q − 8), the zero point's term, for codes [n][k / 2]
// as the file stores them (k a multiple of kInt4Group) and the file's bf16 scales [n][k / 128]
// (2 bytes each, any alignment), into out [n]; by the calling thread.
void int4_scaled_sums(const std::uint8_t* codes, int n, int k, const unsigned char* scale, float* out);

// int4 in place: f [on][c1 − c0] (stride ldf) = Σ_g (scale_g · Σ u·(q − 8) + zero_g · term_g) for
// W's rows w [on][x.groups] (codes unpacked to int8 q − 8) against the rows c0 .. c1 of x (c0 a
// multiple of x.nr), the groups in order with the packed path's arithmetic; scale and zero
// [on][blocks] the file's bf16 (2 bytes each, any alignment), terms [blocks][term_stride] each
// token's Σ (u − zp) per group, readable to the end of x's last panel. `next` (may be empty):
// memory the caller reads next (the following block's codes), fetched into L2 a line per group
// while this runs, so that its unpacking does not wait on DRAM.
struct Prefetch {
    const char* at = nullptr;
    long lines = 0;  // 64-byte lines left to fetch
};
void multiply_rows_int4(const std::uint32_t* w, int on, const PackedRows& x, int c0, int c1, const unsigned char* scale,
                        const unsigned char* zero, const std::int32_t* terms, long term_stride, float* f, long ldf,
                        Prefetch next = {});

namespace detail {
// An int8 kernel's tiles (gemm_lowp.cpp), for the int4 GEMM: MR rows of A against one panel, the
// raw int32 sums into out [MR][nr] (64-byte aligned); entry i handles i + 1 rows.
using LowpTile = void (*)(const std::uint32_t* a, long lda, const std::uint32_t* panel, int groups, void* out);
struct LowpTiles {
    const LowpTile* tiles;
    int mr, nr;
};
LowpTiles int8_tiles(Int8Isa isa);
constexpr int kMaxLowpTile = 8 * 48;  // the largest mr × nr of them
}  // namespace detail

}  // namespace vitreg::gemm
