// Weights quantized symmetric per output channel (quantize.hpp), rows of W through the vector
// loops of the CPU's level.
#include "quantize.hpp"

#include "parallel_each.hpp"
#include "vector_loops.hpp"

namespace vitreg::quant {

Int8Weights quantize_channels(const float* w, int channels, int len, long channel_stride, long elem_stride, int bits) {
    if (bits != 7 && bits != 8) throw Error("int8 weights are 7 or 8 bits wide (got " + std::to_string(bits) + ")");
    const float qmax = static_cast<float>((1 << (bits - 1)) - 1);
    Int8Weights out;
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
    return out;
}

}  // namespace vitreg::quant
