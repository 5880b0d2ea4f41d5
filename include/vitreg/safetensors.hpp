#pragma once
// Reading safetensors files: the file is memory-mapped and its header validated once
// (sizes, dtypes, byte ranges inside the file, no overlaps); tensors are handed out as
// typed views and converted to float32 only when a caller asks.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vitreg {

enum class DType { F32, F16, BF16 };

std::string to_string(DType d);
std::size_t dtype_size(DType d);

// Bounds that a hostile file cannot push the reader past.
struct SafetensorsLimits {
    std::uint64_t max_header_bytes = 100ull << 20;  // the format's own bound
    std::size_t max_tensors = 1u << 20;
    int max_json_depth = 64;  // of the header, and of an HF config.json beside it
};

// One tensor inside a mapped file. `data` may be unaligned; use to_float().
struct TensorView {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const unsigned char* data = nullptr;
    std::size_t nbytes = 0;

    std::int64_t numel() const;
    std::string shape_string() const;  // "[1, 257, 384]"
    // Converts (F16/BF16 widen exactly) into float32, row-major.
    std::vector<float> to_float() const;
};

class SafetensorsFile {
public:
    // Maps and validates `path`. Throws CheckpointError naming the file and the fault.
    explicit SafetensorsFile(const std::string& path, const SafetensorsLimits& limits = {});
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return path_; }
    bool has(const std::string& name) const;
    // Throws CheckpointError if absent.
    const TensorView& get(const std::string& name) const;
    std::vector<std::string> names() const;  // sorted
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // The dtype most tensors are stored in (for `vitreg info`).
    DType dominant_dtype() const;
    // Drops the mapped pages wholly inside a tensor from this process's memory (they stay in
    // the page cache and fault back in if read again). Loading calls it after converting each
    // tensor, so that the file's pages and the packed weights are never resident together.
    void release(const TensorView& tensor) const;

private:
    std::string path_;
    void* map_ = nullptr;
    std::size_t map_size_ = 0;
    std::map<std::string, TensorView> tensors_;
    std::map<std::string, std::string> metadata_;
};

// Half-precision conversions: widening is exact; narrowing rounds to nearest even.
float half_to_float(std::uint16_t h);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_half(float f);

}  // namespace vitreg
