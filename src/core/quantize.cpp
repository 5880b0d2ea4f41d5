// Weights quantized per output channel, int8 and int4 (quantize.hpp): rows of W through the
// vector loops of the CPU's level, strided columns by the scalar rule.
#include "quantize.hpp"

#include "parallel_each.hpp"
#include "vector_loops.hpp"

namespace vitreg::quant {

Int8Weights quantize_channels(const float* w, int channels, int len, long channel_stride, long elem_stride, int bits) {
    Int8Weights out;
    quantize_channels(w, channels, len, channel_stride, elem_stride, bits, out);
    return out;
}

void quantize_channels(const float* w, int channels, int len, long channel_stride, long elem_stride, int bits,
                       Int8Weights& out) {
    if (bits != 7 && bits != 8) throw Error("int8 weights are 7 or 8 bits wide (got " + std::to_string(bits) + ")");
    const float qmax = static_cast<float>((1 << (bits - 1)) - 1);
    out.scale.resize(static_cast<std::size_t>(channels));
    out.q.resize(static_cast<std::size_t>(channels) * len);
    const loops::Table& vec = loops::active();
    parallel_each(channels, [&](int c) {  // channels are independent
        const float* first = w + c * channel_stride;
        if (elem_stride == 1) {  // a row of W: the vector loop, the same bits
            out.scale[c] = vec.quantize_s8_row(first, len, qmax, out.q.data() + static_cast<std::size_t>(c) * len);
            return;
        }
        float max_abs = 0.0f;  // (NaN: as std::max leaves it, in one order for every caller)
        for (int i = 0; i < len; ++i) max_abs = std::max(max_abs, std::fabs(first[i * elem_stride]));
        out.scale[c] = symmetric_scale(max_abs, qmax);
        for (int i = 0; i < len; ++i)
            out.q[static_cast<std::size_t>(c) * len + i] = quantize_s8(first[i * elem_stride], out.scale[c], qmax);
    });
}

Int4Weights quantize_groups(const float* w, int channels, int len, long channel_stride, long elem_stride) {
    Int4Weights out;
    quantize_groups(w, channels, len, channel_stride, elem_stride, out);
    return out;
}

void quantize_groups(const float* w, int channels, int len, long channel_stride, long elem_stride, Int4Weights& out) {
    const int bytes = int4_row_bytes(len), groups = int4_groups(len);
    out.codes.assign(static_cast<std::size_t>(channels) * bytes, 0);
    out.scale.assign(static_cast<std::size_t>(channels) * groups, 0);
    out.zero.assign(out.scale.size(), 0);
    const loops::Table& vec = loops::active();
    parallel_each(channels, [&](int c) {  // channels are independent
        if (elem_stride == 1) {  // a row of W: the vector loop, the same bits
            const std::size_t at = static_cast<std::size_t>(c) * groups;
            vec.quantize_u4_row(w + c * channel_stride, len, out.scale.data() + at, out.zero.data() + at,
                                out.codes.data() + static_cast<std::size_t>(c) * bytes);
            return;
        }
        for (int g = 0; g < groups; ++g) {
            const float* first = w + c * channel_stride;
            const int i0 = g * kInt4Group, i1 = std::min(len, i0 + kInt4Group);
            float lo = first[i0 * elem_stride], hi = lo;  // (NaN: as these comparisons leave it, for every caller)
            for (int i = i0; i < i1; ++i) {
                const float v = first[i * elem_stride];
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            const AffineU4 a = affine_u4(lo, hi);
            const std::size_t at = static_cast<std::size_t>(c) * groups + g;
            out.scale[at] = to_bf16(a.scale);
            out.zero[at] = to_bf16(a.zero);
            std::uint8_t* row = out.codes.data() + static_cast<std::size_t>(c) * bytes;
            for (int i = i0; i < i1; ++i)
                row[i / 2] = static_cast<std::uint8_t>(row[i / 2] | (quantize_u4(first[i * elem_stride], a) << (4 * (i % 2))));
        }
    });
}

}  // namespace vitreg::quant
