#include "core/safetensors.hpp"

#include "quantize.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "json_limits.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = (h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1f;
    std::uint32_t mant = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: renormalize
            exp = 127 - 15 + 1;
            while ((mant & 0x400u) == 0) {
                mant <<= 1;
                --exp;
            }
            bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

std::uint16_t float_to_half(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN, inf
    if (abs >= 0x477ff000u) return sign | 0x7c00u;                                  // rounds past 65504
    if (abs < 0x38800000u) {                                                        // subnormal or zero
        if (abs < 0x33000000u) return sign;
        const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        const int shift = 113 - static_cast<int>(abs >> 23) + 13;
        std::uint32_t h = mant >> shift;
        const std::uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return sign | static_cast<std::uint16_t>(h);
    }
    std::uint32_t h = ((abs >> 23) - 112) << 10 | ((abs >> 13) & 0x3ffu);
    const std::uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still right
    return sign | static_cast<std::uint16_t>(h);
}

std::uint16_t float_to_bf16(float f) { return quant::to_bf16(f); }

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
    throw CheckpointError(path + ": " + what);
}

DType parse_dtype(const std::string& path, const std::string& name, const std::string& s) {
    if (auto d = find_enum<DType>(s)) return *d;
    fail(path, "tensor '" + name + "' has dtype '" + s + "', which vitreg does not read (" + enum_choices<DType>(", ", ", ") +
                   " only)");
}

std::uint64_t read_u64_le(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path, const SafetensorsLimits& limits, bool header_only)
    : path_(path), map_(path, 8, [](std::size_t size) {
          return "file is " + std::to_string(size) + " bytes, too short for a safetensors header";
      }) {
    const auto* bytes = map_.data();
    const std::uint64_t header_len = read_u64_le(bytes);
    if (header_len > limits.max_header_bytes)
        fail(path, "header claims " + std::to_string(header_len) + " bytes, over the limit of " +
                       std::to_string(limits.max_header_bytes));
    if (header_len > map_.size() - 8)
        fail(path, "header claims " + std::to_string(header_len) + " bytes but the file has only " +
                       std::to_string(map_.size() - 8) + " after the length (truncated?)");
    const char* hbegin = reinterpret_cast<const char*>(bytes + 8);
    nlohmann::json header;
    try {
        header = parse_json_bounded(std::string_view(hbegin, header_len), limits.max_json_depth);
    } catch (const std::exception& e) {
        fail(path, std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) fail(path, "header is not a JSON object");
    if (header.size() > limits.max_tensors + 1) fail(path, "header lists too many tensors");

    const unsigned char* data = bytes + 8 + header_len;
    const std::uint64_t data_size = map_.size() - 8 - header_len;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        const auto& entry = it.value();
        if (name == "__metadata__") {
            if (!entry.is_object()) fail(path, "__metadata__ is not an object");
            for (auto m = entry.begin(); m != entry.end(); ++m) {
                if (!m.value().is_string()) fail(path, "__metadata__ value '" + m.key() + "' is not a string");
                metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
            !entry.contains("data_offsets"))
            fail(path, "tensor '" + name + "' lacks dtype, shape or data_offsets");
        const auto& jd = entry["dtype"];
        const auto& js = entry["shape"];
        const auto& jo = entry["data_offsets"];
        if (!jd.is_string()) fail(path, "tensor '" + name + "': dtype is not a string");
        if (!js.is_array() || js.size() > 8) fail(path, "tensor '" + name + "': shape is not an array of rank <= 8");
        if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
            fail(path, "tensor '" + name + "': data_offsets is not a pair of non-negative integers");
        TensorView v;
        v.name = name;
        v.dtype = parse_dtype(path, name, jd.get<std::string>());
        std::uint64_t numel = 1;
        for (const auto& d : js) {
            if (!d.is_number_unsigned()) fail(path, "tensor '" + name + "': shape holds a non-integer or negative size");
            const std::uint64_t s = d.get<std::uint64_t>();
            if (s != 0 && numel > std::numeric_limits<std::uint64_t>::max() / 16 / s)
                fail(path, "tensor '" + name + "': shape overflows");
            numel *= s;
            v.shape.push_back(static_cast<std::int64_t>(s));
        }
        const std::uint64_t begin = jo[0].get<std::uint64_t>(), end = jo[1].get<std::uint64_t>();
        if (begin > end || (end > data_size && !header_only))
            fail(path, "tensor '" + name + "': data_offsets [" + std::to_string(begin) + ", " +
                           std::to_string(end) + "] fall outside the " + std::to_string(data_size) +
                           "-byte data section (truncated file?)");
        if (end - begin != numel * dtype_size(v.dtype))
            fail(path, "tensor '" + name + "': " + std::to_string(end - begin) + " bytes for shape " +
                           v.shape_string() + " of " + to_string(v.dtype) + " (expected " +
                           std::to_string(numel * dtype_size(v.dtype)) + ")");
        v.data = end <= data_size ? data + begin : nullptr;  // past the end: header_only's
        v.nbytes = static_cast<std::size_t>(end - begin);
        if (v.nbytes) ranges.emplace_back(begin, end);
        tensors_.emplace(name, std::move(v));
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second) fail(path, "two tensors overlap in the data section");
}

void SafetensorsFile::release(const TensorView& tensor) const { drop_pages(tensor.data, tensor.nbytes); }

bool SafetensorsFile::has(const std::string& name) const { return tensors_.count(name) != 0; }

const TensorView& SafetensorsFile::get(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) fail(path_, "missing tensor '" + name + "'");
    return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
    std::vector<std::string> out;
    for (const auto& kv : tensors_) out.push_back(kv.first);
    return out;
}

}  // namespace vitreg
