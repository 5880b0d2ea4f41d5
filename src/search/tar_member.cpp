// One member of an uncompressed tar shard read at its header's offset, the way the search page
// shows a webdataset image: one header checked (checksum, type, size) and its data read, nothing
// else of the shard. GNU long-name ('L') and pax ('x', 'g') headers before it are stepped over.
#include <fstream>

#include "vitreg/error.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

namespace {

constexpr std::int64_t kBlock = 512;

// An octal field (NUL or space ended), or -1 when it is none; GNU's base-256 sizes are refused
// (no image is 8 GiB).
std::int64_t octal(const char* field, int width) {
    std::int64_t v = 0;
    int digits = 0, i = 0;
    while (i < width && field[i] == ' ') ++i;
    for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
        if (v > (std::int64_t(1) << 40)) return -1;
        v = v * 8 + (field[i] - '0');
    }
    if (digits == 0 || (i < width && field[i] != ' ' && field[i] != '\0')) return -1;
    return v;
}

bool checksum_ok(const char* h) {
    const std::int64_t stored = octal(h + 148, 8);
    std::int64_t sum = 0;
    for (int i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    return stored == sum;
}

}  // namespace

std::string read_tar_member(const std::string& shard, std::int64_t offset, std::uint64_t max_bytes) {
    std::ifstream in(shard, std::ios::binary);
    if (!in) throw UsageError(shard + ": cannot read the shard");
    unsigned char magic[2] = {0, 0};
    in.read(reinterpret_cast<char*>(magic), 2);
    if ((magic[0] == 0x1f && magic[1] == 0x8b) || (magic[0] == 'B' && magic[1] == 'Z') || (magic[0] == 0x28 && magic[1] == 0xb5) ||
        (magic[0] == 0xfd && magic[1] == '7'))
        throw UsageError(shard + ": a compressed shard: its members cannot be read by offset (no thumbnail)");
    if (offset < 0 || offset % kBlock != 0)
        throw UsageError(shard + ": offset " + std::to_string(offset) + " is not a tar header's (a multiple of 512)");
    in.clear();
    for (int headers = 0; headers < 4; ++headers) {
        char h[kBlock];
        in.seekg(offset);
        if (!in.read(h, kBlock)) throw UsageError(shard + ": no tar header at offset " + std::to_string(offset) + " (past the end)");
        if (!checksum_ok(h)) throw UsageError(shard + ": no valid tar header at offset " + std::to_string(offset));
        const std::int64_t size = octal(h + 124, 12);
        if (size < 0) throw UsageError(shard + ": the member at offset " + std::to_string(offset) + " states no size");
        const char type = h[156];
        if (type == 'L' || type == 'x' || type == 'g') {  // describes the next header: step over it
            offset += kBlock + (size + kBlock - 1) / kBlock * kBlock;
            continue;
        }
        if (type != '0' && type != '\0' && type != '7')
            throw UsageError(shard + ": the member at offset " + std::to_string(offset) + " is not a regular file");
        if (static_cast<std::uint64_t>(size) > max_bytes)
            throw UsageError(shard + ": the member at offset " + std::to_string(offset) + " is " + std::to_string(size) +
                             " bytes, over the limit of " + std::to_string(max_bytes));
        std::string data(static_cast<std::size_t>(size), '\0');
        if (size && !in.read(&data[0], size)) throw UsageError(shard + ": the member at offset " + std::to_string(offset) + " is truncated");
        return data;
    }
    throw UsageError(shard + ": more than 3 extended headers before the member at offset " + std::to_string(offset));
}

std::string read_entry_bytes(const IndexEntry& entry, std::uint64_t max_bytes) {
    if (!entry.shard.empty()) return read_tar_member(entry.shard, entry.offset, max_bytes);
    std::ifstream in(entry.path, std::ios::binary | std::ios::ate);
    if (!in) throw UsageError(entry.path + ": cannot read the image");
    const auto size = static_cast<std::uint64_t>(in.tellg());
    if (size > max_bytes) throw UsageError(entry.path + ": " + std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes));
    std::string data(size, '\0');
    in.seekg(0);
    if (size && !in.read(&data[0], static_cast<std::streamsize>(size))) throw UsageError(entry.path + ": cannot read the image");
    return data;
}

}  // namespace vitreg
