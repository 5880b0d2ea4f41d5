#pragma once
// The reduced-precision number formats of the forward (docs/design.md, "Reduced precision"),
// written once: the GEMM packers, the activation quantizer and the tests all round through these.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "parallel_each.hpp"
#include "vitreg/error.hpp"

namespace vitreg::quant {

// fp32 → bf16, round to nearest even; a NaN stays a (quiet) NaN instead of rounding to ±Inf.
// Branch-free, so that loops over it vectorize.
inline std::uint16_t to_bf16(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const std::uint32_t quiet = (u >> 16) | 0x40u;
    return static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

inline float from_bf16(std::uint16_t h) {
    const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }

// Two values as the 32-bit group vdpbf16ps reads: the even one in the low half.
inline std::uint32_t bf16_pair(float even, float odd) {
    return static_cast<std::uint32_t>(to_bf16(even)) | (static_cast<std::uint32_t>(to_bf16(odd)) << 16);
}

// An asymmetric uint8 mapping q = clamp(round(x / scale) + zero_point, 0, 255).
struct AffineU8 {
    float scale = 1.0f;
    std::int32_t zero_point = 0;
};

// ONNX Runtime's DynamicQuantizeLinear rule over the range [lo, hi] widened to hold 0:
// scale = (hi − lo) / 255, zero point round(−lo / scale) in [0, 255]. An empty range (all
// zeros) maps to scale 1, zero point 0, so every value quantizes to 0 exactly.
inline AffineU8 affine_u8(float lo, float hi) {
    lo = std::fmin(lo, 0.0f);
    hi = std::fmax(hi, 0.0f);
    AffineU8 q;
    const float scale = (hi - lo) / 255.0f;
    if (!(scale > 0.0f) || !std::isfinite(scale)) return q;
    q.scale = scale;
    const float zp = std::nearbyint(-lo / scale);
    q.zero_point = zp < 0.0f ? 0 : zp > 255.0f ? 255 : static_cast<std::int32_t>(zp);
    return q;
}

// Round half to even, then saturate; NaN → 0 (no undefined float → int cast). Clamped before
// rounding (which cannot change a saturated result) so that adding and removing 1.5·2^23
// rounds exactly: a branch-free form the quantizing loop vectorizes.
inline std::uint8_t quantize_u8(float x, AffineU8 q) {
    float v = x / q.scale;
    v = v > -256.0f ? (v < 256.0f ? v : 256.0f) : -256.0f;  // NaN fails v > −256
    v = (v + 12582912.0f) - 12582912.0f;
    v += static_cast<float>(q.zero_point);
    v = v > 0.0f ? (v < 255.0f ? v : 255.0f) : 0.0f;
    return static_cast<std::uint8_t>(static_cast<std::int32_t>(v));
}

// Symmetric int8 with scale = max|w| / qmax (1 for an all-zero channel); qmax 127 for 8-bit
// weights, 63 for 7-bit ones.
inline float symmetric_scale(float max_abs, float qmax = 127.0f) {
    return max_abs > 0.0f && std::isfinite(max_abs) ? max_abs / qmax : 1.0f;
}

// Round half to even, then saturate at ±qmax; NaN → 0. Clamped before rounding (qmax is whole,
// so that changes no result) and rounded by adding and removing 1.5·2^23, as quantize_u8: a
// branch-free form the per-channel loop vectorizes (a 7B's load quantizes 6.7 billion weights).
inline std::int8_t quantize_s8(float w, float scale, float qmax = 127.0f) {
    float v = w / scale;
    v = v == v ? v : 0.0f;  // NaN
    v = v > -qmax ? (v < qmax ? v : qmax) : -qmax;
    v = (v + 12582912.0f) - 12582912.0f;
    return static_cast<std::int8_t>(static_cast<std::int32_t>(v));
}

// Weights quantized symmetric per output channel to `bits` (7 or 8): q [channels][len], each
// channel's scale symmetric_scale(max|w|, 2^(bits−1) − 1). What gemm::pack_int8 packs, and what a
// quantized checkpoint stores (vitreg convert --dtype int8): the same numbers, bit for bit.
// Leaves a resize()'s new elements uninitialized, for a buffer written whole right after: zeroing
// the codes first had taken a tenth of an @int8 load.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = UninitializedAllocator<U>;
    };
    UninitializedAllocator() = default;
    template <class U>
    UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

struct Int8Weights {
    std::vector<std::int8_t, UninitializedAllocator<std::int8_t>> q;
    std::vector<float> scale;  // [channels]
};

// Channel c's values are w[c · channel_stride + i · elem_stride], i < len (quantize.cpp). The
// second form fills `out`, reusing its storage: a 7B's largest codes (67 MB) would otherwise be
// fresh pages for every tensor, faulted in and zeroed by the kernel.
Int8Weights quantize_channels(const float* w, int channels, int len, long channel_stride, long elem_stride, int bits = 8);
void quantize_channels(const float* w, int channels, int len, long channel_stride, long elem_stride, int bits,
                       Int8Weights& out);

// int4 weights, affine per group of kInt4Group along k (torchao's Int4WeightOnlyConfig: uint4 in
// [0, 15] with a float zero, w = (q − 8) · scale + zero): over the group's range [lo, hi],
// scale = bf16(max((hi − lo) / 15, 1e-6)), zero = bf16(lo + 8 · scale), and
// q = clamp(round((w − (zero − 8 · scale)) / scale), 0, 15), both parameters rounded to bf16
// first, so that q fits the numbers stored. A range that is not finite maps to scale 1, zero 0.
constexpr int kInt4Group = 128;

struct AffineU4 {
    float scale = 1.0f, zero = 0.0f;  // bf16 values
};

inline AffineU4 affine_u4(float lo, float hi) {
    AffineU4 q;
    const float scale = std::fmax((hi - lo) / 15.0f, 1e-6f);
    if (!std::isfinite(scale) || !std::isfinite(lo)) return q;
    q.scale = round_bf16(scale);
    q.zero = round_bf16(lo + q.scale * 8.0f);
    return q;
}

inline std::uint8_t quantize_u4(float w, AffineU4 q) {
    const float min = q.zero - q.scale * 8.0f;
    const float v = std::nearbyint((w - min) / q.scale);
    return v >= 0.0f ? (v <= 15.0f ? static_cast<std::uint8_t>(v) : 15) : 0;  // NaN fails v >= 0
}

// The weight q stands for, (q − 8) · scale + zero: the product is exact in fp32 (4 × 8 bits),
// so the one rounding is the sum's.
inline float dequantize_u4(std::uint8_t q, AffineU4 p) {
    return static_cast<float>(static_cast<int>(q) - 8) * p.scale + p.zero;
}

// Weights quantized to int4 per output channel, group by group of kInt4Group along it (the last
// group shorter where len is not a multiple): what gemm::pack_int4 packs, and what an int4 file
// stores (vitreg convert --dtype int4), the same numbers bit for bit. Codes two to a byte, the
// even element in the low nibble, each channel's row padded to whole bytes with a 0 nibble.
struct Int4Weights {
    std::vector<std::uint8_t> codes;       // [channels][int4_row_bytes(len)]
    std::vector<std::uint16_t> scale, zero;  // [channels][int4_groups(len)] bf16
};

inline int int4_row_bytes(int len) { return (len + 1) / 2; }
inline int int4_groups(int len) { return (len + kInt4Group - 1) / kInt4Group; }
inline std::uint8_t int4_code(const std::uint8_t* row, int i) { return (row[i / 2] >> (4 * (i % 2))) & 0xf; }

// Channel c's values are w[c · channel_stride + i · elem_stride], i < len (quantize.cpp; into
// `out` as quantize_channels).
Int4Weights quantize_groups(const float* w, int channels, int len, long channel_stride, long elem_stride);
void quantize_groups(const float* w, int channels, int len, long channel_stride, long elem_stride, Int4Weights& out);

}  // namespace vitreg::quant
