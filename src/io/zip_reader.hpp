#pragma once
// A zip archive read in place from memory (a mapped file): the end-of-central-directory
// record (ZIP64 where the archive has one), the central directory and each entry's local
// header, every offset and size checked against the bytes there are. Entries stored without
// compression (method 0, what torch.save writes) are handed out as pointers into the archive;
// compressed ones are refused by name. Nothing is decompressed or copied.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vitreg {

struct ZipEntry {
    std::string name;
    std::uint16_t method = 0;  // 0 stored, 8 deflated, ...
    std::uint32_t crc32 = 0;
    std::uint64_t compressed_size = 0;
    std::uint64_t size = 0;
    std::uint64_t data_offset = 0;  // where the entry's bytes start in the archive
};

struct ZipLimits {
    std::size_t max_entries = 1u << 20;
};

class ZipReader {
public:
    // Indexes the archive `data[0, size)`; `where` names it in errors ("PATH"). Throws
    // CheckpointError for anything that is not a well-formed single-disk zip.
    ZipReader(const unsigned char* data, std::size_t size, std::string where, const ZipLimits& limits = {});

    const std::vector<ZipEntry>& entries() const { return entries_; }
    // nullptr when there is no entry of that name.
    const ZipEntry* find(const std::string& name) const;
    // The bytes of a stored entry, in place. Throws CheckpointError naming the entry when it is
    // compressed.
    const unsigned char* data(const ZipEntry& entry) const;
    // Throws CheckpointError naming the entry when its bytes do not match its CRC-32 (reads them all).
    void check_crc(const ZipEntry& entry) const;

private:
    [[noreturn]] void fail(const std::string& what) const;
    void read_central_directory(std::uint64_t offset, std::uint64_t size, std::uint64_t count, std::uint64_t end);
    void locate_data(ZipEntry& entry, std::uint64_t local_offset, std::uint64_t limit) const;

    const unsigned char* bytes_;
    std::size_t size_;
    std::string where_;
    ZipLimits limits_;
    std::vector<ZipEntry> entries_;
    std::map<std::string, std::size_t> index_;
};

// The CRC-32 of zip (and gzip, PNG), continuing from `crc` (0 to start).
std::uint32_t crc32(const unsigned char* data, std::size_t size, std::uint32_t crc = 0);

}  // namespace vitreg
