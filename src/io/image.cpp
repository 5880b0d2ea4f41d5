#include "vitreg/image.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "decoders.hpp"
#include "stb_guards.hpp"
#include "vitreg/error.hpp"

// stb_image lives privately in this translation unit; no file I/O of its own. Only the formats
// vitreg reads through it are compiled in (JPEG goes to libjpeg-turbo, WebP to libwebp): PSD and PIC are not (2.27's PIC reader dereferences NULL when
// asked for 3 channels), nor HDR.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_NO_STDIO
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_NO_PSD
#define STBI_NO_PIC
#define STBI_NO_JPEG
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

void check_pixel_count(std::int64_t w, std::int64_t h, const std::string& name, const ImageLimits& limits) {
    if (w > 0 && h > limits.max_pixels / w)
        throw ImageError(name + ": image is " + std::to_string(w) + "x" + std::to_string(h) + ", over the limit of " +
                         std::to_string(limits.max_pixels) + " pixels");
}

namespace {

// stb's header scan (stbi_info) allocates only fixed structures: the GIF decoder's state, tens
// of KB.
constexpr std::size_t kHeaderScanCap = std::size_t(1) << 20;

// The largest single buffer stb 2.27 allocates to decode a w x h file of `size` bytes (to 3
// channels), read from its code for the formats compiled in:
//  - PNG: the IDAT data, grown by doubling to under 2 x the file; the inflated data, first sized
//    for the image (at most (8w + 1) h: 16-bit RGBA plus a filter byte a row) and doubled when the
//    stream runs longer (an interlaced one does, by under 2 x); pixels of at most 8 bytes;
//  - BMP, TGA, PNM, GIF's first frame: at most 4 bytes a pixel; a TGA palette, 65535 x 4 bytes;
//  - to 8-bit RGB: 6 bytes a pixel from 16 bits, then 3.
// So 16 bytes per padded pixel, twice the file, and 1 MiB for the fixed structures and palettes.
// A zlib stream that inflates past that is a decompression bomb: stb fails on the refusal.
std::size_t stb_allocation_cap(int w, int h, std::size_t size) {
    // No stb size exceeds 32 bits; capping there keeps the products in 64.
    const std::uint64_t padded = std::min<std::uint64_t>((std::uint64_t(w) + 32) * (std::uint64_t(h) + 32), 1ull << 32);
    return static_cast<std::size_t>(16 * padded + 2 * std::uint64_t(size) + kHeaderScanCap);
}

// PIL's mode for a PNG, from IHDR's bit depth and colour type.
std::string png_mode(const std::uint8_t* data) {
    const int depth = data[24], colour = data[25];
    switch (colour) {
        case 0: return depth == 1 ? "1" : depth == 16 ? "I" : "L";
        case 2: return "RGB";
        case 3: return "P";
        case 4: return "LA";
        default: return "RGBA";
    }
}

// stb for PNG, BMP, PNM, TGA and GIF. Its conversions to RGB are PIL's (grey replicated, alpha
// dropped, a palette looked up, 16 bits to their high byte) except 16-bit grey: PIL opens that as
// 32-bit integers ("I") and its convert("RGB") clips them to 255.
Image decode_with_stb(const std::uint8_t* data, std::size_t size, const std::string& name, const ImageLimits& limits,
                      bool keep_native) {
    StbAllocCap cap(kHeaderScanCap);  // from here on, and its statistics describe this decode
    if (size > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw ImageError(name + ": file too large to decode");
    int w = 0, h = 0, comp = 0;
    const bool png = size >= 26 && is_png(data, size);
    // stb refuses huge PNGs with a generic message; read IHDR's size to say what is wrong.
    if (png) check_pixel_count(be32(data + 16), be32(data + 20), name, limits);
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
    Image img;
    img.mode = png ? png_mode(data) : comp == 1 ? "L" : comp == 2 ? "LA" : comp == 4 ? "RGBA" : "RGB";
    const bool grey16 = img.mode == "I";
    // PIL's own bands, where they are asked for and differ from RGB: PNG's RGBA and LA.
    const int bands = keep_native && png && (img.mode == "RGBA" || img.mode == "LA") ? (img.mode == "LA" ? 2 : 4) : 3;
    int got_w = 0, got_h = 0, got_c = 0;
    cap.set(stb_allocation_cap(w, h, size));
    void* px = grey16 ? static_cast<void*>(stbi_load_16_from_memory(data, static_cast<int>(size), &got_w, &got_h, &got_c, 1))
                      : static_cast<void*>(stbi_load_from_memory(data, static_cast<int>(size), &got_w, &got_h, &got_c, bands));
    if (!px) {
        if (cap.refused())
            throw ImageError(name + ": cannot decode (its data would need more memory than a " + std::to_string(w) + "x" +
                             std::to_string(h) + " image can: a decompression bomb?)");
        const char* why = stbi_failure_reason();
        throw ImageError(name + ": cannot decode (" + std::string(why ? why : "corrupt data") + ")");
    }
    img.width = got_w;
    img.height = got_h;
    const std::size_t n = static_cast<std::size_t>(got_w) * got_h;
    if (grey16) {
        const auto* v = static_cast<const std::uint16_t*>(px);
        img.rgb.resize(n * 3);
        for (std::size_t i = 0; i < n; ++i)
            img.rgb[3 * i] = img.rgb[3 * i + 1] = img.rgb[3 * i + 2] = static_cast<std::uint8_t>(std::min<int>(v[i], 255));
        if (keep_native) img.grey32.assign(v, v + n);
    } else if (bands != 3) {
        const auto* v = static_cast<const std::uint8_t*>(px);
        img.native.assign(v, v + n * bands);
        img.native_bands = bands;
        img.rgb.resize(n * 3);
        for (std::size_t i = 0; i < n; ++i)
            for (int c = 0; c < 3; ++c) img.rgb[3 * i + c] = v[i * bands + (bands == 2 ? 0 : c)];
    } else {
        const auto* v = static_cast<const std::uint8_t*>(px);
        img.rgb.assign(v, v + n * 3);
    }
    stbi_image_free(px);
    return img;
}

}  // namespace

Image decode_image_memory(const std::uint8_t* data, std::size_t size, const std::string& name,
                          const DecodeOptions& options) {
    if (size == 0) throw ImageError(name + ": empty file");
    Image img = is_jpeg(data, size)   ? decode_jpeg(data, size, name, options.limits, options.draft, options.keep_native)
                : is_webp(data, size) ? decode_webp(data, size, name, options.limits, options.keep_native)
                                      : decode_with_stb(data, size, name, options.limits, options.keep_native);
    if (options.exif_transpose) apply_exif_orientation(img, exif_orientation(data, size));
    return img;
}

Image decode_image_memory(const std::uint8_t* data, std::size_t size, const std::string& name, const ImageLimits& limits) {
    DecodeOptions options;
    options.limits = limits;
    return decode_image_memory(data, size, name, options);
}

Image decode_image(const std::string& path, const DecodeOptions& options) {
    const ImageLimits& limits = options.limits;
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
    return decode_image_memory(bytes.data(), bytes.size(), path, options);
}

Image decode_image(const std::string& path, const ImageLimits& limits) {
    DecodeOptions options;
    options.limits = limits;
    return decode_image(path, options);
}

}  // namespace vitreg
