#include "stb_guards.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// Reads the three header numbers (width, height, maximum value) the way stb does: blanks and
// '#' comments skipped, digits up to the first non-digit.
void check_pnm_header(const std::uint8_t* data, std::size_t size, const std::string& name) {
    std::size_t at = 2;
    long value = 0;
    for (int field = 0; field < 3; ++field) {
        while (at < size && (data[at] == ' ' || (data[at] >= '\t' && data[at] <= '\r') || data[at] == '#')) {
            if (data[at] == '#')
                while (at < size && data[at] != '\n' && data[at] != '\r') ++at;
            else
                ++at;
        }
        std::size_t digits = 0;
        value = 0;
        while (at < size && data[at] >= '0' && data[at] <= '9') {
            if (++digits > 8) throw ImageError(name + ": corrupt PNM header (a number with more than 8 digits)");
            value = value * 10 + (data[at] - '0');
            ++at;
        }
    }
    // stb 2.27 sizes its buffer for 8 bits and then reads 16 (a heap overflow).
    if (value > 255)
        throw ImageError(name + ": 16-bit PNM (maximum value " + std::to_string(value) + ") is not supported");
}

// A chunk type by its letters, or in hex when it has other bytes.
std::string chunk_type(const std::uint8_t* p) {
    bool letters = true;
    for (int i = 0; i < 4; ++i) letters = letters && ((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'z');
    if (letters) return std::string(reinterpret_cast<const char*>(p), 4);
    char hex[11];
    std::snprintf(hex, sizeof hex, "0x%08x", static_cast<unsigned>(be32(p)));
    return hex;
}

// stb converts 16-bit pixels to 8 bits through a buffer of 6 bytes a pixel sized in an int
// without an overflow check; over INT_MAX / 6 pixels it is too small.
void check_png_ihdr(const std::uint8_t* ihdr, const std::string& name) {
    const std::uint64_t w = be32(ihdr), h = be32(ihdr + 4);
    if (ihdr[8] == 16 && w * h > std::uint64_t(INT_MAX / 6))
        throw ImageError(name + ": 16-bit PNG is " + std::to_string(w) + "x" + std::to_string(h) + ", over the " +
                         std::to_string(INT_MAX / 6) + " pixels stb can convert to 8 bits");
}

// Each chunk after the signature: length, type, data, CRC. stb 2.27 reserves a chunk's declared
// length before reading it (an IDAT declaring 2^31 - 1 bytes asks for 2 GB), so a length the file
// cannot hold is refused here. A missing CRC is left to stb, which reads it as zero.
void check_png_chunks(const std::uint8_t* data, std::size_t size, const std::string& name) {
    std::size_t at = 8;
    while (at < size) {
        const std::size_t left = size - at;
        if (left < 8)
            throw ImageError(name + ": cannot decode (truncated PNG: " + std::to_string(left) +
                             " bytes after the last chunk, a chunk header needs 8)");
        const std::uint32_t length = be32(data + at);
        const std::uint8_t* type = data + at + 4;
        const std::size_t remain = left - 8;
        if (length > 0x7FFFFFFFu)
            throw ImageError(name + ": cannot decode (corrupt PNG: chunk " + chunk_type(type) + " declares " +
                             std::to_string(length) + " bytes, over the format's limit of 2147483647)");
        if (std::memcmp(type, "IEND", 4) == 0) return;  // stb reads no further
        if (length > remain)
            throw ImageError(name + ": cannot decode (truncated or corrupt PNG: chunk " + chunk_type(type) + " declares " +
                             std::to_string(length) + " bytes, " + std::to_string(remain) + " remain)");
        if (std::memcmp(type, "IHDR", 4) == 0 && length >= 13) check_png_ihdr(type + 4, name);
        at += 12 + std::size_t(length);
    }
}

// A TGA whose pixels cannot fit in its bytes. An uncompressed true-colour or grey one: stb copies
// each row with stbi__getn and ignores its failure, so a file cut short leaves the rest of the
// pixels as whatever the heap held (CVE-2023-45663). Colour-mapped, RLE and 15/16-bit RGB files are
// read a byte at a time and stb reads zeros past the end: a 25-byte file declaring 20728x1806
// colour-mapped pixels took 6 s and 578 MB under ASan (found by fuzz_disparity). An RLE packet is
// 1 byte and one pixel at least, for 128 pixels at most. Colour-map type 0 or 1 at byte 1 with one
// of these image types at byte 2 is no other format vitreg reads (each has a magic number). stb
// reads a header cut short as zeros too (a 17-byte one passed before), so it is read so here.
void check_tga(const std::uint8_t* bytes, std::size_t size, const std::string& name) {
    std::uint8_t data[18] = {};
    std::memcpy(data, bytes, std::min<std::size_t>(size, sizeof data));
    if (size < 3 || data[1] > 1) return;
    const bool mapped = data[1] == 1, rle = data[2] >= 9;
    const int type = data[2] & ~8;  // 1 colour-mapped, 2 true colour, 3 grey; +8 for RLE
    if (mapped ? type != 1 : type != 2 && type != 3) return;
    const std::uint64_t w = data[12] | data[13] << 8, h = data[14] | data[15] << 8;
    const int bits = data[16];
    if ((bits != 8 && bits != 15 && bits != 16 && bits != 24 && bits != 32) || w == 0 || h == 0) return;
    const std::uint64_t pixel_bytes = (bits + 7) / 8, pixels = w * h;
    const std::uint64_t map = mapped ? (data[5] | data[6] << 8) * ((data[7] + 7) / 8) : 0;
    const std::uint64_t need = map + (rle ? (pixels + 127) / 128 * (1 + pixel_bytes) : pixels * pixel_bytes);
    const std::uint64_t have = size - std::min<std::size_t>(size, 18 + data[0]);
    if (have < need)
        throw ImageError(name + ": truncated TGA (" + std::to_string(w) + "x" + std::to_string(h) + " pixels of " +
                         std::to_string(pixel_bytes) + " bytes need " + (rle ? "at least " : "") + std::to_string(need) +
                         (map ? " with the colour map" : "") + ", " + std::to_string(have) + " present)");
}

}  // namespace

bool is_png(const std::uint8_t* data, std::size_t size) {
    static const unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    return size >= 8 && std::memcmp(data, kPng, 8) == 0;
}

std::uint32_t be32(const std::uint8_t* p) {
    return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}

void check_before_stb(const std::uint8_t* data, std::size_t size, const std::string& name) {
    if (size >= 2 && data[0] == 'P' && (data[1] == '5' || data[1] == '6')) check_pnm_header(data, size, name);
    if (is_png(data, size)) check_png_chunks(data, size, name);
    check_tga(data, size, name);
}

namespace {

thread_local std::size_t t_cap = 0;  // 0: no cap
thread_local StbAllocStats t_stats;

bool may_allocate(std::size_t size) {
    if (size > t_stats.largest_request) t_stats.largest_request = size;
    if (t_cap != 0 && size > t_cap) {
        t_stats.refused = true;
        return false;
    }
    return true;
}

void* granted(void* p, std::size_t size) {
    if (p && size > t_stats.largest_granted) t_stats.largest_granted = size;
    return p;
}

}  // namespace

void* stb_malloc(std::size_t size) { return may_allocate(size) ? granted(std::malloc(size), size) : nullptr; }

// A refused realloc leaves the old block to stb, which frees it on its error path.
void* stb_realloc(void* p, std::size_t size) {
    return may_allocate(size) ? granted(std::realloc(p, size), size) : nullptr;
}

void stb_free(void* p) { std::free(p); }

StbAllocCap::StbAllocCap(std::size_t cap) : previous_(t_cap) {
    t_stats = StbAllocStats{};
    set(cap);
}

StbAllocCap::~StbAllocCap() { t_cap = previous_; }

void StbAllocCap::set(std::size_t cap) {
    t_cap = cap;
    t_stats.cap = cap;
}

bool StbAllocCap::refused() const { return t_stats.refused; }

StbAllocStats last_stb_allocations() { return t_stats; }

}  // namespace vitreg
