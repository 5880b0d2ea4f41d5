#include "vitreg/image.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "stb_guards.hpp"
#include "vitreg/error.hpp"

// stb_image lives privately in this translation unit; no file I/O of its own. Only the formats
// vitreg reads are compiled in: PSD and PIC are not (2.27's PIC reader dereferences NULL when
// asked for 3 channels), nor HDR.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_NO_STDIO
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_NO_PSD
#define STBI_NO_PIC
#define STBI_FAILURE_USERMSG
// Every buffer stb allocates goes through the per-thread cap (stb_guards.hpp).
#define STBI_MALLOC(size) ::vitreg::stb_malloc(size)
#define STBI_REALLOC(p, size) ::vitreg::stb_realloc(p, size)
#define STBI_FREE(p) ::vitreg::stb_free(p)
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#endif
#include <stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace vitreg {

namespace {

void check_pixel_count(std::int64_t w, std::int64_t h, const std::string& name, const ImageLimits& limits) {
    // Divided, not multiplied: a header may declare 2^32 - 1 on each side.
    if (w > 0 && h > limits.max_pixels / w)
        throw ImageError(name + ": image is " + std::to_string(w) + "x" + std::to_string(h) + ", over the limit of " +
                         std::to_string(limits.max_pixels) + " pixels");
}

// stb's header scan (stbi_info) allocates only fixed structures: the JPEG decoder's tables and
// the GIF decoder's state, tens of KB.
constexpr std::size_t kHeaderScanCap = std::size_t(1) << 20;

// The largest single buffer stb 2.27 allocates to decode a w x h file of `size` bytes (to 3
// channels), read from its code for the formats compiled in:
//  - PNG: the IDAT data, grown by doubling to under 2 x the file; the inflated data, first sized
//    for the image (at most (8w + 1) h: 16-bit RGBA plus a filter byte a row) and doubled when the
//    stream runs longer (an interlaced one does, by under 2 x); pixels of at most 8 bytes;
//  - JPEG: a plane per component padded to whole MCUs (at most 32 more pixels each way), 2 bytes
//    a coefficient when progressive; 3 bytes a pixel out;
//  - BMP, TGA, PNM, GIF's first frame: at most 4 bytes a pixel; a TGA palette, 65535 x 4 bytes;
//  - to 8-bit RGB: 6 bytes a pixel from 16 bits, then 3.
// So 16 bytes per padded pixel, twice the file, and 1 MiB for the fixed structures and palettes.
// A zlib stream that inflates past that is a decompression bomb: stb fails on the refusal.
std::size_t stb_allocation_cap(int w, int h, std::size_t size) {
    // No stb size exceeds 32 bits; capping there keeps the products in 64.
    const std::uint64_t padded = std::min<std::uint64_t>((std::uint64_t(w) + 32) * (std::uint64_t(h) + 32), 1ull << 32);
    return static_cast<std::size_t>(16 * padded + 2 * std::uint64_t(size) + kHeaderScanCap);
}

}  // namespace

Image decode_image_memory(const std::uint8_t* data, std::size_t size, const std::string& name, const ImageLimits& limits) {
    StbAllocCap cap(kHeaderScanCap);  // from here on, and its statistics describe this decode
    if (size == 0) throw ImageError(name + ": empty file");
    if (size > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw ImageError(name + ": file too large to decode");
    int w = 0, h = 0, comp = 0;
    // stb refuses huge PNGs with a generic message; read IHDR's size to say what is wrong.
    if (size >= 24 && is_png(data, size)) check_pixel_count(be32(data + 16), be32(data + 20), name, limits);
    check_before_stb(data, size, name);  // stb already parses headers and tables when asked for the size
    if (!stbi_info_from_memory(data, static_cast<int>(size), &w, &h, &comp)) {
        const char* why = stbi_failure_reason();
        if (size >= 4 && (std::memcmp(data, "8BPS", 4) == 0 || std::memcmp(data, "\x53\x80\xF6\x34", 4) == 0))
            why = "PSD and PIC files are not read";
        throw ImageError(name + ": not a decodable image (" + std::string(why ? why : "unknown format") + ")");
    }
    // A top-down BMP stores a negative height; stb's header scan passes it on as it is (its
    // loader takes the absolute value).
    if (h < 0 && h != std::numeric_limits<int>::min() && size >= 2 && data[0] == 'B' && data[1] == 'M') h = -h;
    if (w <= 0 || h <= 0) throw ImageError(name + ": image has no pixels");
    check_pixel_count(w, h, name, limits);
    // stb decodes a cut-off JPEG without complaint; its end-of-image marker tells.
    if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8) {
        std::size_t end = size;
        while (end > 2 && (data[end - 1] == 0x00 || data[end - 1] == 0x0A || data[end - 1] == 0x0D || data[end - 1] == 0x20)) --end;
        if (end < 4 || data[end - 2] != 0xFF || data[end - 1] != 0xD9)
            throw ImageError(name + ": truncated JPEG (no end-of-image marker)");
    }
    int got_w = 0, got_h = 0, got_c = 0;
    cap.set(stb_allocation_cap(w, h, size));
    unsigned char* px = stbi_load_from_memory(data, static_cast<int>(size), &got_w, &got_h, &got_c, 3);
    if (!px) {
        if (cap.refused())
            throw ImageError(name + ": cannot decode (its data would need more memory than a " + std::to_string(w) + "x" +
                             std::to_string(h) + " image can: a decompression bomb?)");
        const char* why = stbi_failure_reason();
        throw ImageError(name + ": cannot decode (" + std::string(why ? why : "corrupt data") + ")");
    }
    Image img;
    img.width = got_w;
    img.height = got_h;
    img.rgb.assign(px, px + static_cast<std::size_t>(got_w) * got_h * 3);
    stbi_image_free(px);
    return img;
}

Image decode_image(const std::string& path, const ImageLimits& limits) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw ImageError(path + ": " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw ImageError(path + ": is a directory, not an image");
    if (!S_ISREG(st.st_mode)) throw ImageError(path + ": not a regular file");
    if (st.st_size > limits.max_file_bytes)
        throw ImageError(path + ": file is " + std::to_string(st.st_size) + " bytes, over the limit");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ImageError(path + ": cannot open: " + std::strerror(errno));
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(st.st_size));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (static_cast<std::size_t>(in.gcount()) != bytes.size()) throw ImageError(path + ": read failed");
    return decode_image_memory(bytes.data(), bytes.size(), path, limits);
}

}  // namespace vitreg
