#include "vitreg/tensor_file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "vitreg/config.hpp"
#include "vitreg/error.hpp"
#include "core/safetensors.hpp"
#include "io/torch_file.hpp"

namespace vitreg {

std::string to_string(DType d) { return name_of(d); }

std::size_t dtype_size(DType d) {
    return d == DType::F32 || d == DType::I32 ? 4 : d == DType::I8 || d == DType::U8 ? 1 : 2;
}

std::int64_t TensorView::numel() const {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
}

std::string TensorView::shape_string() const {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

void TensorView::check_floats() const {
    const TensorView& t = *this;
    if (!t.data && t.nbytes)  // a header-only read's tensor past the end of the file
        throw CheckpointError("tensor '" + t.name + "' lies past the end of its file (truncated; only its header was read)");
    if (t.dtype == DType::I8)
        throw CheckpointError("tensor '" + t.name + "' is I8: int8-quantized weights, which only the int8 forward reads "
                              "(with their scales)");
    if (t.dtype == DType::U8)
        throw CheckpointError("tensor '" + t.name + "' is U8: int4-quantized weights, which only the int4 forward reads "
                              "(with their scales and zero points)");
    if (t.dtype == DType::I32)
        throw CheckpointError("tensor '" + t.name + "' is I32: the row sums of int8-quantized weights, which only the "
                              "int8 forward reads");
}

namespace {

// t's values into out [numel()] as float32 (F16/BF16 widen exactly); t passed check_floats.
void widen(const TensorView& t, float* out) {
    const auto n = static_cast<std::size_t>(t.numel());
    if (n == 0) return;
    if (t.dtype == DType::F32) {
        std::memcpy(out, t.data, n * 4);
        return;
    }
    const bool half = t.dtype == DType::F16;
    // In parallel: a 7B's load widens 6.7 billion values, one tensor at a time.
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, 1 << 16), [&](const tbb::blocked_range<std::size_t>& r) {
        std::uint16_t v;
        if (half)
            for (std::size_t i = r.begin(); i < r.end(); ++i) std::memcpy(&v, t.data + 2 * i, 2), out[i] = half_to_float(v);
        else  // (apart, so that the inline bf16 loop vectorizes)
            for (std::size_t i = r.begin(); i < r.end(); ++i) std::memcpy(&v, t.data + 2 * i, 2), out[i] = bf16_to_float(v);
    });
}

}  // namespace

std::vector<float> TensorView::to_float() const {
    check_floats();  // before allocating for it
    std::vector<float> out(static_cast<std::size_t>(numel()));
    widen(*this, out.data());
    return out;
}

void TensorView::to_float(float* out) const {
    check_floats();
    widen(*this, out);
}

DType TensorFile::dominant_dtype() const {
    std::array<std::size_t, std::size(EnumTable<DType>::names)> bytes{};  // one per dtype, in the enum's order
    for (const auto& name : names()) {
        const TensorView& t = get(name);
        bytes.at(static_cast<std::size_t>(t.dtype)) += t.nbytes;
    }
    return static_cast<DType>(std::max_element(bytes.begin(), bytes.end()) - bytes.begin());
}

void TensorFile::drop_pages(const unsigned char* data, std::size_t nbytes) {
    if (!data) return;
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(data), end = begin + nbytes;
    const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

namespace {

bool has_torch_extension(const std::string& path) {
    const auto dot = path.find_last_of("./");
    if (dot == std::string::npos || path[dot] != '.') return false;
    const std::string ext = path.substr(dot);
    return ext == ".pth" || ext == ".pt" || ext == ".bin" || ext == ".ckpt";
}

}  // namespace

bool is_torch_file(const std::string& path) {
    unsigned char head[9] = {};
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(head), sizeof head);
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0) return true;  // torch.save's zip
    if (got >= 4 && std::memcmp(head, "PK\x05\x06", 4) == 0) return true;  // an empty zip
    if (got >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return true;  // a bare pickle
    if (got == 9 && head[8] == '{') return false;  // a safetensors header
    return has_torch_extension(path);
}

namespace {

std::unique_ptr<TensorFile> open_file(const std::string& path, const ConfigOverrides& overrides, bool header_only) {
    if (is_torch_file(path)) return std::make_unique<TorchFile>(path, overrides.state_dict_key);
    if (!overrides.state_dict_key.empty())
        throw UsageError(path + ": a state-dict key ('" + overrides.state_dict_key +
                         "') picks the tensors inside a PyTorch file; this is a safetensors file");
    return std::make_unique<SafetensorsFile>(path, overrides.limits, header_only);
}

}  // namespace

std::unique_ptr<TensorFile> open_tensor_file(const std::string& path, const ConfigOverrides& overrides) {
    return open_file(path, overrides, false);
}

std::unique_ptr<TensorFile> open_tensor_file_header(const std::string& path, const ConfigOverrides& overrides) {
    return open_file(path, overrides, true);
}

}  // namespace vitreg
