#pragma once
// Reading webdataset tar shards (the layout img2dataset writes for LAION, DataComp, CC12M) as a
// stream, never unpacked: members grouped into samples by key as webdataset groups them (the
// key is the member's name up to the first dot of its basename, consecutive members of one key
// form one sample), the image chosen by extension, KEY.json and KEY.txt kept as text. Plain,
// gzip and zstd tar through libarchive. Member names are never used as file paths.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace vitreg::webdataset {

// The image extensions a sample's image member may have (jpg, jpeg, png, webp; any case).
bool is_image_extension(const std::string& ext);

struct Sample {
    std::string key;
    std::uint64_t offset = 0;  // its first member's header, in bytes into the uncompressed tar
    std::string image_ext;     // lower case; empty when the sample has no image member
    std::string image;         // the image's bytes, when asked for
    std::string json;          // KEY.json's text ("" when absent)
    std::string caption;       // KEY.txt's text ("" when absent)
    // A fault of this sample alone (no image, two images, a name with '..' or a leading '/',
    // a key seen before in the shard, a member over the size limit); the shard reads on.
    std::string error;
};

struct Limits {
    std::uint64_t max_image_bytes = 1ull << 30;  // ImageLimits::max_file_bytes
    std::uint64_t max_text_bytes = 1ull << 24;   // KEY.json, KEY.txt
};

class ShardReader {
public:
    // Reads the shard at `path`; one that cannot be opened reads as broken at byte 0.
    ShardReader(const std::string& path, const Limits& limits);
    // Reads `size` bytes at `data` (kept alive by the caller), called `name` in errors.
    ShardReader(const void* data, std::size_t size, const std::string& name, const Limits& limits);
    ~ShardReader();
    ShardReader(const ShardReader&) = delete;
    ShardReader& operator=(const ShardReader&) = delete;

    // The next sample, with its image's bytes when `with_image` (skipped otherwise); false at
    // the shard's end or where it breaks. The samples before a break are all returned; one whose
    // own members the break cut is not.
    bool next(Sample& out, bool with_image);

    // After next() returned false: "" when the shard ended cleanly, else what broke it
    // ("truncated", "not a tar archive", "does not exist", ...) and the byte where it broke.
    const std::string& error() const;
    std::uint64_t error_offset() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace vitreg::webdataset
