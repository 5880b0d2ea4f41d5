#include <cmath>
#include <cstring>
#include <vector>

#include "vitreg/error.hpp"
#include "core/half_rows.hpp"
#include "core/safetensors.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

std::string array_bytes(const ArrayRef& array) {
    const std::size_t n = array.numel();
    std::string out(n * dtype_size(array.dtype), '\0');
    if (array.dtype == DType::F32) {
        if (n) std::memcpy(&out[0], array.data, n * 4);  // x86 and ARM are little-endian
        return out;
    }
    if (array.dtype == DType::F16) {
        // Written as half words, then copied into the string's bytes.
        std::vector<std::uint16_t> half(n);
        floats_to_half(array.data, n, half.data());
        if (n) std::memcpy(&out[0], half.data(), n * 2);
        return out;
    }
    if (array.dtype == DType::I32) {  // int8 weights' row sums, held as floats: exact below 2^24
        for (std::size_t i = 0; i < n; ++i) {
            const float v = array.data[i];
            if (!(std::fabs(v) < 16777216.0f) || v != std::nearbyint(v))
                throw Error("an I32 array holds " + std::to_string(v) + ", not an integer of magnitude below 2^24");
            const auto x = static_cast<std::int32_t>(v);
            std::memcpy(&out[4 * i], &x, 4);
        }
        return out;
    }
    if (array.dtype == DType::I8 || array.dtype == DType::U8) {  // quantized weights, held as the floats of their integers
        const bool s8 = array.dtype == DType::I8;
        const float lo = s8 ? -128.0f : 0.0f, hi = s8 ? 127.0f : 255.0f;
        for (std::size_t i = 0; i < n; ++i) {
            const float v = array.data[i];
            if (!(v >= lo && v <= hi) || v != std::nearbyint(v))
                throw Error("an " + to_string(array.dtype) + " array holds " + std::to_string(v) + ", not an integer in [" +
                            std::to_string(static_cast<int>(lo)) + ", " + std::to_string(static_cast<int>(hi)) + "]");
            out[i] = s8 ? static_cast<char>(static_cast<std::int8_t>(v)) : static_cast<char>(static_cast<std::uint8_t>(v));
        }
        return out;
    }
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t h = float_to_bf16(array.data[i]);
        std::memcpy(&out[2 * i], &h, 2);
    }
    return out;
}

std::string npy_header(const ArrayRef& array) {
    std::string shape = "(";
    for (std::size_t i = 0; i < array.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(array.shape[i]);
    shape += array.shape.size() == 1 ? ",)" : ")";  // as numpy writes it: (5,) and (2, 3)
    if (array.dtype == DType::BF16) throw UsageError(".npy has no bfloat16 type: write f32 or f16");
    if (is_integer(array.dtype)) throw UsageError(".npy is written as f32 or f16 here, not quantized integers");
    std::string header = std::string("{'descr': '") + (array.dtype == DType::F16 ? "<f2" : "<f4") + "', 'fortran_order': False, 'shape': " + shape + ", }";
    // Magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
    const std::size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>((header.size() >> 8) & 0xff);
    out += header;
    return out;
}

std::string npy_bytes(const ArrayRef& array) { return npy_header(array) + array_bytes(array); }

void write_npy(const std::string& path, const ArrayRef& array) { write_file_atomic(path, npy_bytes(array)); }

}  // namespace vitreg
