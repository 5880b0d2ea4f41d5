#pragma once
// A file of named tensors, whatever its format: safetensors (SafetensorsFile) or a PyTorch
// torch.save archive (TorchFile). Tensors are handed out as typed views into the file (or, where
// the format stores them scattered, into a buffer the file owns) and converted to float32 only
// when a caller asks.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vitreg/enum_names.hpp"

namespace vitreg {

// The integer dtypes are a quantized checkpoint's alone (vitreg convert --dtype int8|int4), read
// only by its forward (Checkpoint::load_int8, load_int4), and to_float refuses them. I8: int8
// weights, beside their scales; I32: each int8 weight row's sum Σq; U8: an int4 file's 4-bit
// codes, two to a byte.
enum class DType { F32, F16, BF16, I8, U8, I32 };

// I8, U8 or I32: quantized integers, not values.
inline bool is_integer(DType d) { return d == DType::I8 || d == DType::U8 || d == DType::I32; }

template <>
struct EnumTable<DType> {
    static constexpr const char* what = "dtype";
    static constexpr EnumName<DType> names[] = {{DType::F32, "F32"}, {DType::F16, "F16"}, {DType::BF16, "BF16"},
                                                {DType::I8, "I8"},   {DType::U8, "U8"},   {DType::I32, "I32"}};
};

std::string to_string(DType d);
std::size_t dtype_size(DType d);

// One tensor, row-major and contiguous. `data` may be unaligned; use to_float(). It lives as
// long as the file that handed it out.
struct TensorView {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const unsigned char* data = nullptr;
    std::size_t nbytes = 0;

    std::int64_t numel() const;
    // The weights it holds: numel, twice that for U8 (an int4 file's codes, two to a byte; a row
    // of an odd count's padding nibble counted).
    std::int64_t weights() const { return dtype == DType::U8 ? 2 * numel() : numel(); }
    std::string shape_string() const;  // "[1, 257, 384]"
    // Converts (F16/BF16 widen exactly) into float32, row-major. Throws CheckpointError for the
    // integer dtypes (quantized weights mean nothing without their scales).
    std::vector<float> to_float() const;
    // The same into dst [numel()]: a caller that loads tensor after tensor reuses one buffer
    // instead of faulting in fresh pages for each.
    void to_float(float* dst) const;
    // Throws what to_float throws, before anything is allocated for it.
    void check_floats() const;
};

// Bounds that a hostile safetensors file cannot push the reader past (ConfigOverrides carries
// them, so they live with the files rather than with the safetensors reader).
struct SafetensorsLimits {
    std::uint64_t max_header_bytes = 100ull << 20;  // the format's own bound
    std::size_t max_tensors = 1u << 20;
    int max_json_depth = 64;  // of the header, and of an HF config.json beside it
};

class TensorFile {
public:
    virtual ~TensorFile() = default;

    virtual const std::string& path() const = 0;
    virtual bool has(const std::string& name) const = 0;
    // Throws CheckpointError naming the file if absent.
    virtual const TensorView& get(const std::string& name) const = 0;
    virtual std::vector<std::string> names() const = 0;  // sorted
    // String metadata the file states about itself (safetensors __metadata__; empty for others).
    virtual const std::map<std::string, std::string>& metadata() const = 0;
    // Drops the mapped pages wholly inside a tensor from this process's memory (they stay in
    // the page cache and fault back in if read again). Loading calls it after converting each
    // tensor, so that the file's pages and the packed weights are never resident together.
    virtual void release(const TensorView& tensor) const = 0;

    // The dtype most tensor bytes are stored in (for `vitreg info`).
    DType dominant_dtype() const;

protected:
    // madvise(MADV_DONTNEED) on the whole pages inside [data, data + nbytes) of a read-only map.
    static void drop_pages(const unsigned char* data, std::size_t nbytes);
};

struct ConfigOverrides;
// Opens `path` in the format its content says: a zip (PK\3\4) or a bare pickle is a PyTorch
// file (TorchFile, which refuses the legacy and TorchScript formats by name), a safetensors
// header is safetensors, and otherwise the extension decides (.pth .pt .bin .ckpt: PyTorch).
// `overrides.limits` bounds a safetensors header, `overrides.state_dict_key` picks the state
// dict inside a PyTorch file. Throws CheckpointError naming the file and the fault.
std::unique_ptr<TensorFile> open_tensor_file(const std::string& path, const ConfigOverrides& overrides);
// True when open_tensor_file would read `path` as a PyTorch file.
bool is_torch_file(const std::string& path);

}  // namespace vitreg
