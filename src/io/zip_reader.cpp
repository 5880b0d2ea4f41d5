#include "zip_reader.hpp"

#include <array>
#include <utility>

#include "io/printable.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr std::size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kEnd64Size = 56, kLocator64Size = 20;

std::uint64_t le(const unsigned char* p, int n) {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// [offset, offset + length) lies inside [0, limit).
bool inside(std::uint64_t offset, std::uint64_t length, std::uint64_t limit) {
    return offset <= limit && length <= limit - offset;
}

const std::array<std::uint32_t, 256>& crc_table() {
    static const std::array<std::uint32_t, 256> table = [] {
        std::array<std::uint32_t, 256> t{};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    return table;
}

}  // namespace

std::uint32_t crc32(const unsigned char* data, std::size_t size, std::uint32_t crc) {
    const auto& t = crc_table();
    crc = ~crc;
    for (std::size_t i = 0; i < size; ++i) crc = t[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

void ZipReader::fail(const std::string& what) const { throw CheckpointError(where_ + ": " + what); }

ZipReader::ZipReader(const unsigned char* data, std::size_t size, std::string where, const ZipLimits& limits)
    : bytes_(data), size_(size), where_(std::move(where)), limits_(limits) {
    if (size_ < kEndSize) fail("file is " + std::to_string(size_) + " bytes, too short for a zip archive");
    // The end-of-central-directory record: the last one whose comment fits in the file.
    std::uint64_t end = size_ - kEndSize;
    const std::uint64_t lowest = size_ - kEndSize > 0xffff ? size_ - kEndSize - 0xffff : 0;
    for (;; --end) {
        if (le(bytes_ + end, 4) == kEndSig && le(bytes_ + end + 20, 2) <= size_ - kEndSize - end) break;
        if (end == lowest)
            fail("no zip end-of-central-directory record (a truncated file, or not a zip archive)");
    }
    const unsigned char* e = bytes_ + end;
    if (le(e + 4, 2) != 0 || le(e + 6, 2) != 0) fail("a multi-disk zip archive, which vitreg does not read");
    std::uint64_t count = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
    std::uint64_t cd_limit = end;  // the central directory ends before the records that follow it

    // ZIP64: a locator right before the record points at the 64-bit record.
    if (end >= kLocator64Size && le(bytes_ + end - kLocator64Size, 4) == kLocator64Sig) {
        const unsigned char* loc = bytes_ + end - kLocator64Size;
        const std::uint64_t rec = le(loc + 8, 8);
        if (le(loc + 4, 4) != 0 || le(loc + 16, 4) > 1) fail("a multi-disk ZIP64 archive, which vitreg does not read");
        if (!inside(rec, kEnd64Size, end - kLocator64Size) || le(bytes_ + rec, 4) != kEnd64Sig)
            fail("the ZIP64 locator points at offset " + std::to_string(rec) + ", where there is no ZIP64 record");
        const unsigned char* r = bytes_ + rec;
        if (le(r + 16, 4) != 0 || le(r + 20, 4) != 0) fail("a multi-disk ZIP64 archive, which vitreg does not read");
        count = le(r + 32, 8);
        cd_size = le(r + 40, 8);
        cd_offset = le(r + 48, 8);
        cd_limit = rec;
    } else if (count == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
        fail("the end-of-central-directory record says ZIP64, but there is no ZIP64 record");
    }
    if (!inside(cd_offset, cd_size, cd_limit))
        fail("central directory [" + std::to_string(cd_offset) + ", +" + std::to_string(cd_size) +
             ") lies outside the archive (truncated or corrupt)");
    if (count > limits_.max_entries) fail(std::to_string(count) + " zip entries, over the limit of " + std::to_string(limits_.max_entries));
    if (count > cd_size / kCentralSize)
        fail("the central directory of " + std::to_string(cd_size) + " bytes cannot hold " + std::to_string(count) +
             " entries (corrupt)");
    read_central_directory(cd_offset, cd_size, count, cd_offset);
}

void ZipReader::read_central_directory(std::uint64_t offset, std::uint64_t size, std::uint64_t count,
                                       std::uint64_t data_limit) {
    const std::uint64_t cd_end = offset + size;
    std::uint64_t p = offset;
    entries_.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::string at = "central directory entry " + std::to_string(i) + " (offset " + std::to_string(p) + ")";
        if (!inside(p, kCentralSize, cd_end) || le(bytes_ + p, 4) != kCentralSig) fail(at + " is not a central directory header (corrupt)");
        const unsigned char* h = bytes_ + p;
        const std::uint64_t flags = le(h + 8, 2), name_len = le(h + 28, 2), extra_len = le(h + 30, 2),
                            comment_len = le(h + 32, 2);
        if (!inside(p + kCentralSize, name_len + extra_len + comment_len, cd_end)) fail(at + " runs past the central directory (corrupt)");
        ZipEntry entry;
        entry.name.assign(reinterpret_cast<const char*>(h + kCentralSize), static_cast<std::size_t>(name_len));
        entry.method = static_cast<std::uint16_t>(le(h + 10, 2));
        entry.crc32 = static_cast<std::uint32_t>(le(h + 16, 4));
        entry.compressed_size = le(h + 20, 4);
        entry.size = le(h + 24, 4);
        std::uint64_t disk = le(h + 34, 2), local = le(h + 42, 4);
        // ZIP64 extra field (id 1): the saturated fields, in this order.
        const unsigned char* x = h + kCentralSize + name_len;
        for (std::uint64_t q = 0; q + 4 <= extra_len;) {
            const std::uint64_t id = le(x + q, 2), len = le(x + q + 2, 2);
            if (q + 4 + len > extra_len) fail(at + " ('" + printable(entry.name) + "'): an extra field runs past its end (corrupt)");
            if (id == 1) {
                std::uint64_t r = q + 4;
                auto take = [&](std::uint64_t& field, int width) {
                    if (r + width > q + 4 + len) fail(at + " ('" + printable(entry.name) + "'): the ZIP64 extra field is too short");
                    field = le(x + r, width);
                    r += width;
                };
                if (entry.size == 0xffffffffu) take(entry.size, 8);
                if (entry.compressed_size == 0xffffffffu) take(entry.compressed_size, 8);
                if (local == 0xffffffffu) take(local, 8);
                if (disk == 0xffff) take(disk, 4);
            }
            q += 4 + len;
        }
        if (disk != 0) fail(at + " ('" + printable(entry.name) + "') starts on another disk");
        if (flags & 1) fail("zip entry '" + printable(entry.name) + "' is encrypted");
        locate_data(entry, local, data_limit);
        if (!index_.emplace(entry.name, entries_.size()).second) fail("two zip entries are named '" + printable(entry.name) + "'");
        entries_.push_back(std::move(entry));
        p += kCentralSize + name_len + extra_len + comment_len;
    }
}

void ZipReader::locate_data(ZipEntry& entry, std::uint64_t local, std::uint64_t limit) const {
    const std::string what = "zip entry '" + printable(entry.name) + "'";
    if (!inside(local, kLocalSize, limit) || le(bytes_ + local, 4) != kLocalSig)
        fail(what + ": no local header at offset " + std::to_string(local) + " (corrupt central directory?)");
    const unsigned char* h = bytes_ + local;
    const std::uint64_t name_len = le(h + 26, 2), extra_len = le(h + 28, 2);
    if (!inside(local + kLocalSize, name_len + extra_len, limit)) fail(what + ": its local header runs past the entry data");
    if (name_len != entry.name.size() || entry.name.compare(0, entry.name.size(), reinterpret_cast<const char*>(h + kLocalSize),
                                                             static_cast<std::size_t>(name_len)) != 0)
        fail(what + ": the local header names another entry (corrupt)");
    entry.data_offset = local + kLocalSize + name_len + extra_len;
    if (!inside(entry.data_offset, entry.compressed_size, limit))
        fail(what + ": its " + std::to_string(entry.compressed_size) + " bytes at offset " + std::to_string(entry.data_offset) +
             " run past the entries' area (truncated or corrupt)");
    if (entry.method == 0 && entry.compressed_size != entry.size)
        fail(what + ": stored uncompressed, but its sizes differ (" + std::to_string(entry.compressed_size) + " vs " +
             std::to_string(entry.size) + ")");
}

const ZipEntry* ZipReader::find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second];
}

const unsigned char* ZipReader::data(const ZipEntry& entry) const {
    if (entry.method != 0)
        fail("zip entry '" + printable(entry.name) + "' is compressed (method " + std::to_string(entry.method) +
             (entry.method == 8 ? ", deflate" : "") +
             "); torch.save stores entries uncompressed and vitreg reads them in place: save the file again with "
             "torch.save, or unzip and re-zip it with -0");
    return bytes_ + entry.data_offset;
}

void ZipReader::check_crc(const ZipEntry& entry) const {
    const unsigned char* d = data(entry);
    if (crc32(d, static_cast<std::size_t>(entry.size)) != entry.crc32)
        fail("zip entry '" + printable(entry.name) + "' does not match its CRC-32 (corrupt)");
}

}  // namespace vitreg
