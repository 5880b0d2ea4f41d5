// The EXIF Orientation tag, found where PIL 9.4 finds it, read as PIL's TIFF reader reads it,
// and applied as ImageOps.exif_transpose applies it (docs/design.md, "Pixel pipelines"). Runs on
// hostile bytes: every read is checked against the block it is in; every loop is bounded by the
// data.
//
// Where PIL looks (the block it hands to Image.Exif.load):
//  - JPEG: the first APP1 segment whose payload starts "Exif\0" (JpegImagePlugin), among the
//    marker segments before the first scan; its payload must then start "Exif\0\0" (Exif.load
//    strips those six bytes only; anything else is no TIFF header);
//  - PNG: the eXIf chunk's data, a bare TIFF block (PngImagePlugin prefixes "Exif\0\0", which
//    Exif.load strips again);
//  - WebP: the first EXIF chunk of an extended (VP8X) file whose VP8X flags say it has EXIF
//    (libwebp's demuxer keeps no other), with or without an "Exif\0\0" prefix.
// How PIL reads it (TiffImagePlugin.ImageFileDirectory_v2, then a lookup among 2..8): the
// header's byte order and 42, IFD0 at its offset, its 12-byte entries in order. An entry cut off
// by the end of the block, or one whose data (inline up to 4 bytes, else at its offset) runs past
// it, ends the reading, keeping what came before; an entry of a type PIL does not know, or with
// no data, is skipped. Any other Orientation entry replaces an earlier one, and its first value
// counts: an integer, or a fraction or float equal to one (PIL's lookup compares numbers), where
// bytes and text never match. Only IFD0 is read, so no chain of IFDs can loop.
// Not followed: PIL's fallbacks to a PNG's "Raw profile type exif" text chunk and to an XMP
// "tiff:Orientation" in a PNG's iTXt chunk.
#include <algorithm>
#include <cstring>
#include <vector>

#include "decoders.hpp"

namespace vitreg {

namespace {

class TiffBlock {
public:
    TiffBlock(const std::uint8_t* data, std::size_t size, bool little) : data_(data), size_(size), little_(little) {}
    bool has(std::uint64_t offset, std::uint64_t length) const { return offset <= size_ && length <= size_ - offset; }
    // Callers check has(at, the width) first.
    std::uint32_t u16(std::size_t at) const {
        return little_ ? data_[at] | data_[at + 1] << 8 : data_[at] << 8 | data_[at + 1];
    }
    std::uint32_t u32(std::size_t at) const {
        return little_ ? u16(at) | u16(at + 2) << 16 : u16(at) << 16 | u16(at + 2);
    }
    std::uint64_t u64(std::size_t at) const {
        return little_ ? u32(at) | std::uint64_t(u32(at + 4)) << 32 : std::uint64_t(u32(at)) << 32 | u32(at + 4);
    }
    std::uint8_t u8(std::size_t at) const { return data_[at]; }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    bool little_;
};

constexpr std::uint32_t kOrientation = 0x0112;

// The bytes a value of each TIFF type PIL reads takes (its _load_dispatch); 0 for the types PIL
// skips.
int unit_size(std::uint32_t type) {
    switch (type) {
        case 1: case 2: case 6: case 7: return 1;  // BYTE, ASCII, SBYTE, UNDEFINED
        case 3: case 8: return 2;                  // SHORT, SSHORT
        case 4: case 9: case 11: case 13: return 4;  // LONG, SLONG, FLOAT, IFD
        case 5: case 10: case 12: case 16: return 8;  // RATIONAL, SRATIONAL, DOUBLE, LONG8
        default: return 0;
    }
}

// What PIL makes of an Orientation entry's first value (at `at`, all there), as the key it
// looks up among 2..8: the integer it equals, or 0 for none (bytes, text, a fraction, NaN).
long orientation_value(const TiffBlock& t, std::uint32_t type, std::size_t at) {
    const auto in_range = [](double v) { return v >= 0 && v <= 8 && v == static_cast<long>(v) ? static_cast<long>(v) : 0; };
    switch (type) {
        case 3: return static_cast<long>(t.u16(at));
        case 8: return static_cast<std::int16_t>(t.u16(at));
        case 4: case 13: return static_cast<long>(t.u32(at) <= 8 ? t.u32(at) : 0);
        case 9: return static_cast<std::int32_t>(t.u32(at));
        case 6: return static_cast<std::int8_t>(t.u8(at));
        case 16: {
            const std::uint64_t v = t.u64(at);
            return v <= 8 ? static_cast<long>(v) : 0;
        }
        case 5: case 10: {  // PIL's IFDRational equals an integer when the fraction does
            const std::uint32_t num = t.u32(at), den = t.u32(at + 4);
            if (den == 0) return 0;  // NaN
            const std::int64_t n = type == 5 ? std::int64_t(num) : std::int64_t(static_cast<std::int32_t>(num));
            const std::int64_t d = type == 5 ? std::int64_t(den) : std::int64_t(static_cast<std::int32_t>(den));
            if (n % d != 0) return 0;
            const std::int64_t q = n / d;
            return q >= 0 && q <= 8 ? static_cast<long>(q) : 0;
        }
        case 11: {
            const std::uint32_t bits = t.u32(at);
            float f;
            std::memcpy(&f, &bits, 4);
            return in_range(f);
        }
        case 12: {
            const std::uint64_t bits = t.u64(at);
            double d;
            std::memcpy(&d, &bits, 8);
            return in_range(d);
        }
        default: return 0;  // BYTE, UNDEFINED: bytes; ASCII: text
    }
}

int orientation_of_tiff(const std::uint8_t* data, std::size_t size) {
    if (size < 8) return 1;
    bool little;
    if (data[0] == 'I' && data[1] == 'I')
        little = true;
    else if (data[0] == 'M' && data[1] == 'M')
        little = false;
    else
        return 1;
    // PIL takes 42 in either byte order ("MM\x2a\0" and "II\0\x2a": "wrong byte order"), and
    // "MM\0\x2b" too, which it means as BigTIFF but reads as classic TIFF (it tests byte 2 for
    // 43); "II\x2b\0" it reads as BigTIFF, and fails on the 8-byte header.
    const bool classic = (data[2] == 0x2A && data[3] == 0) || (data[2] == 0 && data[3] == 0x2A) ||
                         (!little && data[2] == 0 && data[3] == 0x2B);
    if (!classic) return 1;
    const TiffBlock t(data, size, little);
    const std::uint32_t ifd = t.u32(4);
    if (!t.has(ifd, 2)) return 1;
    const std::uint32_t entries = t.u16(ifd);
    long value = 1;
    for (std::uint32_t i = 0; i < entries; ++i) {
        const std::uint64_t entry = std::uint64_t(ifd) + 2 + 12 * std::uint64_t(i);
        if (!t.has(entry, 12)) break;  // the IFD runs past the block: PIL keeps what it read
        const std::size_t e = static_cast<std::size_t>(entry);
        const std::uint32_t tag = t.u16(e), type = t.u16(e + 2), count = t.u32(e + 4);
        const int unit = unit_size(type);
        if (unit == 0) continue;  // a type PIL does not read
        const std::uint64_t bytes = std::uint64_t(count) * unit;
        std::size_t at = e + 8;
        if (bytes > 4) {
            const std::uint32_t offset = t.u32(e + 8);
            // Any entry whose data runs past the block ends PIL's reading of the IFD.
            if (!t.has(offset, bytes)) break;
            at = offset;
        }
        if (bytes == 0) continue;  // no data: PIL skips the entry
        // A later entry replaces an earlier one; the first of several values counts.
        if (tag == kOrientation) value = orientation_value(t, type, at);
    }
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
}

bool starts_with(const std::uint8_t* data, std::size_t size, const char* prefix, std::size_t n) {
    return size >= n && std::memcmp(data, prefix, n) == 0;
}

int from_jpeg(const std::uint8_t* data, std::size_t size) {
    std::size_t at = 2;  // after SOI
    while (at < size) {
        if (data[at] != 0xFF) {  // junk between segments: PIL skips it a byte at a time
            ++at;
            continue;
        }
        if (at + 1 >= size) return 1;
        const std::uint8_t marker = data[at + 1];
        if (marker == 0xFF) {  // fill byte
            ++at;
            continue;
        }
        if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD9)) {  // no length
            at += 2;
            continue;
        }
        if (marker == 0xDA) return 1;  // start of scan: PIL reads no further markers
        if (at + 4 > size) return 1;
        const std::size_t length = std::size_t(data[at + 2]) << 8 | data[at + 3];
        if (length < 2 || length > size - at - 2) return 1;  // PIL cannot read the segment
        const std::uint8_t* payload = data + at + 4;
        const std::size_t n = length - 2;
        if (marker == 0xE1 && starts_with(payload, n, "Exif\0", 5))
            return starts_with(payload, n, "Exif\0\0", 6) ? orientation_of_tiff(payload + 6, n - 6) : 1;
        at += 2 + length;
    }
    return 1;
}

std::uint32_t be32_at(const std::uint8_t* p) {
    return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}
std::uint32_t le32_at(const std::uint8_t* p) {
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

int from_png(const std::uint8_t* data, std::size_t size) {
    std::size_t at = 8;  // after the signature
    while (size - at >= 12) {
        const std::uint32_t length = be32_at(data + at);
        const std::uint8_t* type = data + at + 4;
        if (length > size - at - 12) return 1;  // the chunk (and its CRC) runs past the end
        if (std::memcmp(type, "eXIf", 4) == 0) return orientation_of_tiff(data + at + 8, length);
        if (std::memcmp(type, "IEND", 4) == 0) return 1;
        at += 12 + std::size_t(length);
    }
    return 1;
}

int from_webp(const std::uint8_t* data, std::size_t size) {
    if (size < 30) return 1;  // RIFF header, a VP8X chunk
    const std::uint64_t riff_end = std::uint64_t(le32_at(data + 4)) + 8;
    const std::size_t end = riff_end < size ? static_cast<std::size_t>(riff_end) : size;
    if (std::memcmp(data + 12, "VP8X", 4) != 0 || !(data[20] & 0x08)) return 1;  // no EXIF flag
    std::size_t at = 12;
    while (end - at >= 8) {
        const std::uint64_t length = le32_at(data + at + 4);
        if (length > end - at - 8) return 1;
        const std::uint8_t* payload = data + at + 8;
        if (std::memcmp(data + at, "EXIF", 4) == 0) {
            const std::size_t n = static_cast<std::size_t>(length);
            return starts_with(payload, n, "Exif\0\0", 6) ? orientation_of_tiff(payload + 6, n - 6)
                                                          : orientation_of_tiff(payload, n);
        }
        at += 8 + static_cast<std::size_t>(length + (length & 1));
        if (at > end) return 1;
    }
    return 1;
}

}  // namespace

int exif_orientation(const std::uint8_t* data, std::size_t size) {
    if (data == nullptr) return 1;
    if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return from_jpeg(data, size);
    static const std::uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return from_png(data, size);
    if (is_webp(data, size)) return from_webp(data, size);
    return 1;
}

namespace {

// One plane of `bands` samples a pixel, transposed. PIL's transposes (its ROTATE_ constants turn
// counter-clockwise): 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE,
// 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90. Output pixel (x, y) comes from input pixel (sx, sy).
template <class T>
void transpose_plane(std::vector<T>& plane, std::size_t w, std::size_t h, std::size_t bands, int orientation) {
    if (plane.size() != w * h * bands) return;
    const bool swap = orientation >= 5;
    const std::size_t ow = swap ? h : w, oh = swap ? w : h;
    std::vector<T> out(plane.size());
    for (std::size_t y = 0; y < oh; ++y) {
        for (std::size_t x = 0; x < ow; ++x) {
            std::size_t sx = 0, sy = 0;
            switch (orientation) {
                case 2: sx = w - 1 - x, sy = y; break;
                case 3: sx = w - 1 - x, sy = h - 1 - y; break;
                case 4: sx = x, sy = h - 1 - y; break;
                case 5: sx = y, sy = x; break;
                case 6: sx = y, sy = h - 1 - x; break;
                case 7: sx = w - 1 - y, sy = h - 1 - x; break;
                case 8: sx = w - 1 - y, sy = x; break;
            }
            std::copy_n(&plane[(sy * w + sx) * bands], bands, &out[(y * ow + x) * bands]);
        }
    }
    plane.swap(out);
}

}  // namespace

void apply_exif_orientation(Image& image, int orientation) {
    if (orientation < 2 || orientation > 8) return;
    const std::size_t w = static_cast<std::size_t>(image.width), h = static_cast<std::size_t>(image.height);
    if (w == 0 || h == 0 || image.rgb.size() != w * h * 3) return;
    transpose_plane(image.rgb, w, h, 3, orientation);
    if (image.native_bands) transpose_plane(image.native, w, h, static_cast<std::size_t>(image.native_bands), orientation);
    transpose_plane(image.grey32, w, h, 1, orientation);
    if (orientation >= 5) std::swap(image.width, image.height);
}

}  // namespace vitreg
