// WebP through libwebp, as PIL 9.4 reads it (docs/design.md, "Pixel pipelines"). PIL's plugin opens
// every WebP file, still or animated, with libwebp's WebPAnimDecoder (RGBA, not premultiplied; its
// default options) and takes the first frame; convert("RGB") then drops alpha. Its mode as opened
// is "RGBA" when WebPGetFeatures says the file has alpha (for an animation, the VP8X flag), else
// "RGB".
//
// The first frame of WebPAnimDecoder is the frame's bitstream decoded by WebPDecode (with the
// library's default options) into a canvas zero-filled beforehand; the first frame is always a
// key frame, so nothing is blended or disposed. vitreg does the same through the demuxer
// WebPAnimDecoder sits on, and decodes straight into Image::rgb in MODE_RGB: libwebp computes
// the R, G and B bytes of MODE_RGB and MODE_RGBA (non-premultiplied) alike, so the pixels are
// PIL's, and the memory is the 3-byte canvas plus libwebp's own working memory (a few bytes a
// pixel at most: the VP8L ARGB buffer, the lossy alpha plane), where WebPAnimDecoder holds two
// 4-byte canvases besides.
#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "decoders.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

std::uint32_t le32(const std::uint8_t* p) {
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

const char* status_text(VP8StatusCode status) {
    switch (status) {
        case VP8_STATUS_OK: return "ok";
        case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
        case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
        case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
        case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
        case VP8_STATUS_USER_ABORT: return "aborted";
        case VP8_STATUS_SUSPENDED:  // what libwebp also says of a bitstream cut short
        case VP8_STATUS_NOT_ENOUGH_DATA: return "its data is cut short";
    }
    return "unknown error";
}

struct DemuxDelete {
    void operator()(WebPDemuxer* d) const { WebPDemuxDelete(d); }
};
using Demuxer = std::unique_ptr<WebPDemuxer, DemuxDelete>;

// The frame iterator and the decoder's output buffer, released on every path (both are no-ops
// for what vitreg uses today, which libwebp does not promise for later versions).
struct FrameIterator {
    WebPIterator it;
    FrameIterator() { std::memset(&it, 0, sizeof it); }
    ~FrameIterator() { WebPDemuxReleaseIterator(&it); }
};
struct DecoderConfig {
    WebPDecoderConfig config;
    bool ready = false;
    DecoderConfig() { ready = WebPInitDecoderConfig(&config) != 0; }
    ~DecoderConfig() {
        if (ready) WebPFreeDecBuffer(&config.output);
    }
};

}  // namespace

bool is_webp(const std::uint8_t* data, std::size_t size) {
    return size >= 12 && std::memcmp(data, "RIFF", 4) == 0 && std::memcmp(data + 8, "WEBP", 4) == 0;
}

Image decode_webp(const std::uint8_t* data, std::size_t size, const std::string& name, const ImageLimits& limits,
                  bool keep_native) {
    if (!is_webp(data, size)) throw ImageError(name + ": not a WebP file");
    // RIFF's size counts what follows its first 8 bytes; bytes past it are ignored (libwebp, and
    // so PIL, ignore them too, and refuse a file shorter than it says).
    const std::uint64_t riff_size = le32(data + 4);
    if (riff_size + 8 > size)
        throw ImageError(name + ": truncated WebP (its RIFF header declares " + std::to_string(riff_size + 8) +
                         " bytes, the file holds " + std::to_string(size) + ")");
    if (riff_size < 4 + 8 + 1)  // "WEBP", one chunk header, something in it
        throw ImageError(name + ": corrupt WebP (its RIFF header declares " + std::to_string(riff_size) +
                         " bytes, too few for an image)");

    // The sides from the headers alone (no pixel memory), checked before anything is decoded.
    // WebPAnimDecoderNew refuses a file whose headers WebPGetFeatures cannot read (the demuxer
    // is more tolerant), and so does PIL.
    WebPBitstreamFeatures features;
    std::memset(&features, 0, sizeof features);
    const VP8StatusCode header = WebPGetFeatures(data, size, &features);
    if (header != VP8_STATUS_OK)
        throw ImageError(name + ": corrupt WebP (headers: " + std::string(status_text(header)) + ")");
    if (features.width <= 0 || features.height <= 0) throw ImageError(name + ": image has no pixels");
    check_pixel_count(features.width, features.height, name, limits);

    // The demuxer's allocations are a few structures a chunk, bounded by the file's size.
    const WebPData whole{data, size};
    Demuxer demux(WebPDemux(&whole));
    if (!demux) throw ImageError(name + ": corrupt WebP (its chunks are malformed or cut short)");
    const std::uint32_t width = WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_WIDTH);
    const std::uint32_t height = WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_HEIGHT);
    if (width == 0 || height == 0 || width > 0x7FFFFFFFu || height > 0x7FFFFFFFu)
        throw ImageError(name + ": image has no pixels");
    check_pixel_count(width, height, name, limits);
    if (WebPDemuxGetI(demux.get(), WEBP_FF_FRAME_COUNT) == 0) throw ImageError(name + ": corrupt WebP (no frames)");

    FrameIterator frame;
    if (!WebPDemuxGetFrame(demux.get(), 1, &frame.it) || !frame.it.complete || frame.it.fragment.size == 0)
        throw ImageError(name + ": corrupt WebP (its first frame is missing or incomplete)");
    const WebPIterator& it = frame.it;
    if (it.x_offset < 0 || it.y_offset < 0 || it.width <= 0 || it.height <= 0 ||
        std::uint64_t(it.x_offset) + std::uint64_t(it.width) > width ||
        std::uint64_t(it.y_offset) + std::uint64_t(it.height) > height)
        throw ImageError(name + ": corrupt WebP (its first frame lies outside the " + std::to_string(width) + "x" +
                         std::to_string(height) + " canvas)");

    DecoderConfig dec;
    if (!dec.ready) throw ImageError(name + ": cannot decode (libwebp's decoder does not match its headers)");
    WebPDecoderConfig& config = dec.config;
    const VP8StatusCode frame_header = WebPGetFeatures(it.fragment.bytes, it.fragment.size, &config.input);
    if (frame_header != VP8_STATUS_OK)
        throw ImageError(name + ": corrupt WebP (first frame: " + std::string(status_text(frame_header)) + ")");
    if (config.input.width != it.width || config.input.height != it.height)
        throw ImageError(name + ": corrupt WebP (its first frame's bitstream is " + std::to_string(config.input.width) +
                         "x" + std::to_string(config.input.height) + ", its frame header says " +
                         std::to_string(it.width) + "x" + std::to_string(it.height) + ")");

    Image img;
    img.width = static_cast<int>(width);
    img.height = static_cast<int>(height);
    img.mode = features.has_alpha ? "RGBA" : "RGB";
    // With alpha kept (Image::native), RGBA as PIL holds it; else RGB straight into Image::rgb.
    const bool rgba = keep_native && features.has_alpha;
    const std::size_t bands = rgba ? 4 : 3, stride = std::size_t(width) * bands;
    std::vector<std::uint8_t>& canvas = rgba ? img.native : img.rgb;
    canvas.assign(stride * height, 0);  // the canvas before the first frame: transparent black
    const std::size_t offset = std::size_t(it.y_offset) * stride + std::size_t(it.x_offset) * bands;
    config.output.colorspace = rgba ? MODE_RGBA : MODE_RGB;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = canvas.data() + offset;
    config.output.u.RGBA.stride = static_cast<int>(stride);
    config.output.u.RGBA.size = canvas.size() - offset;
    const VP8StatusCode status = WebPDecode(it.fragment.bytes, it.fragment.size, &config);
    if (status != VP8_STATUS_OK)
        throw ImageError(name + ": corrupt WebP (" + std::string(config.input.format == 2 ? "lossless" : "lossy") +
                         " bitstream: " + status_text(status) + ")");
    if (rgba) {
        img.native_bands = 4;
        img.rgb.resize(std::size_t(width) * height * 3);
        for (std::size_t i = 0, n = std::size_t(width) * height; i < n; ++i) std::copy_n(&img.native[4 * i], 3, &img.rgb[3 * i]);
    }
    return img;
}

}  // namespace vitreg
