#include "stb_guards.hpp"

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

bool standalone(std::uint8_t marker) {
    return marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8);  // TEM, RSTn, SOI
}

void check_dht(const std::uint8_t* seg, std::size_t len, const std::string& name) {
    std::size_t at = 0;
    while (at < len) {
        if (len - at < 17) throw ImageError(name + ": corrupt JPEG (Huffman table header cut short)");
        std::size_t codes = 0;
        for (int i = 1; i <= 16; ++i) codes += seg[at + i];
        if (codes > 256)
            throw ImageError(name + ": corrupt JPEG (Huffman table declares " + std::to_string(codes) +
                             " codes, at most 256 exist)");
        at += 17;
        if (len - at < codes) throw ImageError(name + ": corrupt JPEG (Huffman table runs past its segment)");
        at += codes;
    }
}

void check_jpeg_segments(const std::uint8_t* data, std::size_t size, const std::string& name) {
    std::size_t at = 2;
    while (at + 1 < size) {
        if (data[at] != 0xFF) {  // entropy-coded data after a scan: look for the next real marker
            ++at;
            continue;
        }
        const std::uint8_t marker = data[at + 1];
        if (marker == 0xFF) {  // fill byte
            ++at;
            continue;
        }
        if (marker == 0x00 || standalone(marker)) {  // stuffed zero or a marker without a length
            at += 2;
            continue;
        }
        if (marker == 0xD9) return;  // end of image
        if (at + 4 > size) return;  // cut off: the truncation check and stb report it
        const std::size_t len = std::size_t(data[at + 2]) << 8 | data[at + 3];
        if (len < 2 || at + 2 + len > size)
            throw ImageError(name + ": corrupt JPEG (a marker segment runs past the end of the file)");
        if (marker == 0xC4) check_dht(data + at + 4, len - 2, name);
        at += 2 + len;
    }
}

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

}  // namespace

void check_before_stb(const std::uint8_t* data, std::size_t size, const std::string& name) {
    // stb takes a file as JPEG when it starts with SOI after any number of 0xFF fill bytes.
    std::size_t soi = 0;
    while (soi < size && data[soi] == 0xFF) ++soi;
    if (soi > 0 && soi < size && data[soi] == 0xD8) check_jpeg_segments(data + soi - 1, size - soi + 1, name);
    if (size >= 2 && data[0] == 'P' && (data[1] == '5' || data[1] == '6')) check_pnm_header(data, size, name);
}

}  // namespace vitreg
