#pragma once
// A whole regular file mapped read-only (MAP_PRIVATE), unmapped when the owner goes: what the
// safetensors and PyTorch readers hand out tensor views into.
#include <cstddef>
#include <functional>
#include <string>

namespace vitreg {

class MappedFile {
public:
    MappedFile() = default;
    // Opens and maps `path`. A file shorter than `min_size` bytes is refused before mapping with
    // `too_short(size)` as the complaint. Every failure throws CheckpointError("PATH: what").
    MappedFile(const std::string& path, std::size_t min_size, const std::function<std::string(std::size_t)>& too_short);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const unsigned char* data() const { return static_cast<const unsigned char*>(map_); }
    std::size_t size() const { return size_; }

private:
    void* map_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace vitreg
