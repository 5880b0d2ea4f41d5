#pragma once
// Reading safetensors files: the file is memory-mapped and its header validated once
// (sizes, dtypes, byte ranges inside the file, no overlaps); tensors are handed out as
// typed views and converted to float32 only when a caller asks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.hpp"
#include "vitreg/tensor_file.hpp"

namespace vitreg {

class SafetensorsFile final : public TensorFile {
public:
    // Maps and validates `path`. Throws CheckpointError naming the file and the fault.
    // `header_only` (vitreg info): a tensor whose bytes lie past the end of a truncated file is
    // listed with a null `data` (to_float throws) instead of refusing the file.
    explicit SafetensorsFile(const std::string& path, const SafetensorsLimits& limits = {}, bool header_only = false);
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const override { return path_; }
    bool has(const std::string& name) const override;
    // Throws CheckpointError if absent.
    const TensorView& get(const std::string& name) const override;
    std::vector<std::string> names() const override;  // sorted
    const std::map<std::string, std::string>& metadata() const override { return metadata_; }
    void release(const TensorView& tensor) const override;

private:
    std::string path_;
    MappedFile map_;
    std::map<std::string, TensorView> tensors_;
    std::map<std::string, std::string> metadata_;
};

struct ConfigOverrides;
// open_tensor_file, but a safetensors file is read header_only (above).
std::unique_ptr<TensorFile> open_tensor_file_header(const std::string& path, const ConfigOverrides& overrides);

// Half-precision conversions: widening is exact; narrowing rounds to nearest even.
float half_to_float(std::uint16_t h);
// bf16 is a float's top half: inline, so that loops over it vectorize (a call per value had taken
// a fifth of an @int8 load from a bf16 file).
inline float bf16_to_float(std::uint16_t b) {
    const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
std::uint16_t float_to_half(float f);
std::uint16_t float_to_bf16(float f);

}  // namespace vitreg
