// JPEG through libjpeg-turbo, as PIL 9.4 runs it (docs/design.md, "Pixel pipelines"): the library's
// defaults (ISLOW IDCT, fancy upsampling, block smoothing, its colour-space guess), the output
// colour space set from the component count, and PIL's own CMYK -> RGB. PIL's `draft` only adds
// scale_denom.
#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <cstring>
#include <vector>

#include <jerror.h>
#include <jpeglib.h>

#include "decoders.hpp"
#include "pil_convert.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// A progressive file may hold any number of scans, each a pass over the whole coefficient
// buffer: a few hundred bytes can keep libjpeg busy for minutes. Real encoders write about ten;
// this is djpeg's -maxscans advice, generously.
constexpr int kMaxScans = 1000;

struct Failure {
    jpeg_error_mgr manager;  // first: libjpeg hands back a pointer to it
    jpeg_progress_mgr progress;
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX] = {};
    bool truncated = false;
};

Failure& failure_of(j_common_ptr cinfo) { return *reinterpret_cast<Failure*>(cinfo->err); }

extern "C" void on_error(j_common_ptr cinfo) {
    Failure& f = failure_of(cinfo);
    (*cinfo->err->format_message)(cinfo, f.message);
    std::longjmp(f.jump, 1);
}

// Warnings are what PIL ignores too (extraneous bytes, a damaged segment), except running out
// of data: PIL then refuses the file as truncated, and so does vitreg.
extern "C" void on_message(j_common_ptr cinfo, int level) {
    if (level >= 0 || cinfo->err->msg_code != JWRN_JPEG_EOF) return;
    Failure& f = failure_of(cinfo);
    f.truncated = true;
    std::longjmp(f.jump, 1);
}

extern "C" void on_progress(j_common_ptr cinfo) {
    const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
    if (d->input_scan_number <= kMaxScans) return;
    Failure& f = failure_of(cinfo);
    std::snprintf(f.message, sizeof f.message, "more than %d progressive scans", kMaxScans);
    std::longjmp(f.jump, 1);
}

ImageError truncated(const std::string& name) {
    return ImageError(name + ": truncated JPEG (the data ends before the image does)");
}

struct Decompressor {
    jpeg_decompress_struct cinfo;
    Decompressor() { std::memset(&cinfo, 0, sizeof cinfo); }  // so that destroying an uncreated one is safe
    ~Decompressor() { jpeg_destroy_decompress(&cinfo); }
};

}  // namespace

bool is_jpeg(const std::uint8_t* data, std::size_t size) {
    return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

int draft_scale(int width, int height, int want_width, int want_height) {
    if (want_width <= 0 || want_height <= 0) return 1;
    const int scale = std::min(width / want_width, height / want_height);
    for (int s : {8, 4, 2})
        if (scale >= s) return s;
    return 1;
}

Image decode_jpeg(const std::uint8_t* data, std::size_t size, const std::string& name, const ImageLimits& limits,
                  const DraftTarget& draft, bool keep_native) {
    // Everything with a destructor lives before setjmp: a longjmp back here skips none.
    Image image;
    std::vector<JSAMPLE> row;
    Decompressor d;
    Failure f;
    jpeg_decompress_struct& cinfo = d.cinfo;
    cinfo.err = jpeg_std_error(&f.manager);
    f.manager.error_exit = on_error;
    f.manager.emit_message = on_message;
    f.progress.progress_monitor = on_progress;
    if (setjmp(f.jump)) {
        if (f.truncated) throw truncated(name);
        throw ImageError(name + ": corrupt JPEG (" + std::string(f.message) + ")");
    }
    jpeg_create_decompress(&cinfo);
    cinfo.progress = &f.progress;
    jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
    if (jpeg_read_header(&cinfo, TRUE) != JPEG_HEADER_OK) throw ImageError(name + ": JPEG holds tables but no image");
    check_pixel_count(cinfo.image_width, cinfo.image_height, name, limits);
    switch (cinfo.num_components) {
        case 1: cinfo.out_color_space = JCS_GRAYSCALE; image.mode = "L"; break;
        case 3: cinfo.out_color_space = JCS_RGB; image.mode = "RGB"; break;
        case 4: cinfo.out_color_space = JCS_CMYK; image.mode = "CMYK"; break;  // libjpeg converts YCCK
        default:
            throw ImageError(name + ": JPEG with " + std::to_string(cinfo.num_components) +
                             " components (PIL and vitreg read 1, 3 or 4)");
    }
    if (draft) {
        const auto [want_w, want_h] = draft(static_cast<int>(cinfo.image_width), static_cast<int>(cinfo.image_height));
        const int s = draft_scale(static_cast<int>(cinfo.image_width), static_cast<int>(cinfo.image_height), want_w, want_h);
        cinfo.scale_num = 1;
        cinfo.scale_denom = static_cast<unsigned>(s);
        image.draft_scale = s;
    }
    // The large buffers (a progressive file's coefficients) come from libjpeg's virtual arrays,
    // which this bounds: 2 bytes a coefficient, at most 4 components, whole MCUs.
    const long padded = (static_cast<long>(cinfo.image_width) + 32) * (static_cast<long>(cinfo.image_height) + 32);
    cinfo.mem->max_memory_to_use = 8 * padded + (64l << 20);
    jpeg_start_decompress(&cinfo);
    const int w = static_cast<int>(cinfo.output_width), h = static_cast<int>(cinfo.output_height);
    const int channels = cinfo.output_components;
    image.width = w;
    image.height = h;
    image.rgb.resize(static_cast<std::size_t>(w) * h * 3);
    if (channels != 3) row.resize(static_cast<std::size_t>(w) * channels);
    if (keep_native && channels == 4) {
        image.native.resize(static_cast<std::size_t>(w) * h * 4);
        image.native_bands = 4;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        std::uint8_t* out = image.rgb.data() + static_cast<std::size_t>(cinfo.output_scanline) * w * 3;
        JSAMPROW target = channels == 3 ? out : row.data();
        if (jpeg_read_scanlines(&cinfo, &target, 1) != 1)  // only a suspending source returns none; memory never does
            throw truncated(name);
        if (channels == 1) {
            for (int x = 0; x < w; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = row[x];
        } else if (channels == 4) {
            // PIL stores libjpeg's Adobe CMYK inverted ("CMYK;I"): ink amounts.
            std::uint8_t* ink = keep_native ? image.native.data() + static_cast<std::size_t>(cinfo.output_scanline - 1) * w * 4
                                            : row.data();
            for (int x = 0; x < 4 * w; ++x) ink[x] = static_cast<std::uint8_t>(255 - row[x]);
            for (int x = 0; x < w; ++x) pil::cmyk_to_rgb(ink + 4 * x, out + 3 * x);
        }
    }
    jpeg_finish_decompress(&cinfo);
    return image;
}

}  // namespace vitreg
