#include "vitreg/preprocess.hpp"

#include <algorithm>
#include <cmath>

#include "core/parse_number.hpp"
#include "io/pil_resize.hpp"
#include "vitreg/error.hpp"
#include "pil_convert.hpp"
#include "core/resample.hpp"

namespace vitreg {

namespace {

int parse_positive(const std::string& s, const std::string& whole) {
    const auto v = parse_integer(s, 1, 65536);
    if (!v) throw UsageError("bad --resize '" + whole + "' (expected eval, none, WxH, short:N or long:N)");
    return static_cast<int>(*v);
}

}  // namespace

ResizeSpec ResizeSpec::parse(const std::string& text) {
    ResizeSpec r;
    if (text == "eval") return r;
    if (text == "none") {
        r.mode = Mode::None;
        return r;
    }
    for (auto [prefix, mode] : {std::pair{"short:", Mode::Short}, std::pair{"long:", Mode::Long}}) {
        const std::string p = prefix;
        if (text.compare(0, p.size(), p) == 0) {
            r.mode = mode;
            r.size = parse_positive(text.substr(p.size()), text);
            return r;
        }
    }
    const auto x = text.find('x');
    if (x == std::string::npos) throw UsageError("bad --resize '" + text + "' (expected eval, none, WxH, short:N or long:N)");
    r.mode = Mode::Exact;
    r.width = parse_positive(text.substr(0, x), text);
    r.height = parse_positive(text.substr(x + 1), text);
    return r;
}

ResizeSpec ResizeSpec::for_model(const Config& config) const {
    ResizeSpec r = *this;
    r.eval_crop = config.input_size;
    r.eval_resize = std::max(config.eval_resize(), config.input_size);
    r.eval_squash = config.eval_squash;
    if (!r.pipeline) r.pipeline = config.pipeline;
    r.filter = config.interpolation;
    return r;
}

std::string ResizeSpec::to_string() const {
    std::string s = "?";
    switch (mode) {
        case Mode::Eval: s = "eval"; break;
        case Mode::None: s = "none"; break;
        case Mode::Exact: s = std::to_string(width) + "x" + std::to_string(height); break;
        case Mode::Short: s = "short:" + std::to_string(size); break;
        case Mode::Long: s = "long:" + std::to_string(size); break;
    }
    if (pipeline) s += " pipeline=" + vitreg::to_string(*pipeline);
    if (resampler != Resampler::Pil) s += " resample=" + vitreg::to_string(resampler);
    if (draft) s += " decode=draft";
    if (exif_transpose) s += " exif-transpose";
    return s;
}

std::string to_string(Resampler r) { return r == Resampler::Pil ? "pil" : "torch"; }

Resampler parse_resampler(const std::string& s) {
    if (s == "pil") return Resampler::Pil;
    if (s == "torch") return Resampler::Torch;
    throw UsageError("unknown --resample '" + s + "' (expected pil or torch)");
}

namespace {

// Refuses a resize whose intermediate image would be huge: a 734465×5 file of 33 bytes asks
// `eval` for 37,606,604×256 pixels (found by fuzz_image). Computed in 64 bits, before any cast.
int resized_side(long long side, const std::string& name, int sw, int sh, const ResizeSpec& spec, long long other) {
    if (side * other > kMaxResizedPixels)
        throw ImageError(name + ": --resize " + spec.to_string() + " would make the " + std::to_string(sw) + "x" +
                         std::to_string(sh) + " image " + std::to_string(side * other) + " pixels, over the limit of " +
                         std::to_string(kMaxResizedPixels));
    return static_cast<int>(side);
}

}  // namespace

Geometry plan_geometry(int sw, int sh, const ResizeSpec& spec, int patch, const std::string& name) {
    Geometry g;
    g.source_width = sw;
    g.source_height = sh;
    g.resized_width = sw;
    g.resized_height = sh;
    auto down = [patch](int v) { return v / patch * patch; };
    switch (spec.mode) {
        case ResizeSpec::Mode::Eval: {
            // torchvision Resize(256): the long side becomes int(256 * long / short);
            // CenterCrop rounds half to even (Python round), as nearbyint does; HF's
            // processors floor.
            const int kShort = spec.eval_resize, kCrop = spec.eval_crop;
            const bool floor = spec.pipeline_or_default() == PixelPipeline::HF;
            const auto offset = [floor](int spare) { return floor ? spare / 2 : static_cast<int>(std::nearbyint(spare / 2.0)); };
            // Squashing (HF's SigLIP, DINOv3 and ViT processors; timm's crop_mode 'squash'): both
            // sides to the resize, then the center crop of DeiT's processor and timm's crop_pct.
            if (spec.eval_squash) {
                g.resized_width = g.resized_height = kShort;
                g.width = g.height = kCrop;
                g.crop_top = g.crop_left = offset(kShort - kCrop);
                if (kCrop % patch)
                    throw UsageError("--resize eval squashes to " + std::to_string(kCrop) +
                                     ", not a multiple of the patch size " + std::to_string(patch));
                return g;
            }
            if (sw <= sh) {
                g.resized_width = kShort;
                g.resized_height = resized_side(static_cast<long long>(kShort) * sh / sw, name, sw, sh, spec, kShort);
            } else {
                g.resized_height = kShort;
                g.resized_width = resized_side(static_cast<long long>(kShort) * sw / sh, name, sw, sh, spec, kShort);
            }
            g.width = g.height = kCrop;
            g.crop_top = offset(g.resized_height - kCrop);
            g.crop_left = offset(g.resized_width - kCrop);
            if (kCrop % patch)
                throw UsageError("--resize eval crops to " + std::to_string(kCrop) + ", not a multiple of the patch size " +
                                 std::to_string(patch) +
                                 "; use WxH, short:N or long:N");
            return g;
        }
        case ResizeSpec::Mode::None:
            g.width = down(sw);
            g.height = down(sh);
            break;
        case ResizeSpec::Mode::Exact:
            if (spec.width % patch || spec.height % patch)
                throw UsageError("--resize " + spec.to_string() + ": both sides must be multiples of the patch size " +
                                 std::to_string(patch));
            g.resized_width = g.width = resized_side(spec.width, name, sw, sh, spec, spec.height);
            g.resized_height = g.height = spec.height;
            break;
        case ResizeSpec::Mode::Short:
        case ResizeSpec::Mode::Long: {
            const bool width_is_ref = (spec.mode == ResizeSpec::Mode::Short) == (sw <= sh);
            if (width_is_ref) {
                g.width = spec.size;
                g.height = resized_side(static_cast<long long>(sh) * spec.size / sw, name, sw, sh, spec, spec.size);
            } else {
                g.height = spec.size;
                g.width = resized_side(static_cast<long long>(sw) * spec.size / sh, name, sw, sh, spec, spec.size);
            }
            g.resized_width = g.width = down(g.width);
            g.resized_height = g.height = down(g.height);
            break;
        }
    }
    if (g.width <= 0 || g.height <= 0)
        throw ImageError(name + ": " + std::to_string(sw) + "x" + std::to_string(sh) + " image leaves no whole " +
                         std::to_string(patch) + "-pixel patch after --resize " + spec.to_string());
    return g;
}

Image resize_and_crop(const Image& image, const ResizeSpec& spec, const Geometry& g) {
    Image out;
    out.width = g.width;
    out.height = g.height;
    out.mode = "RGB";
    if (g.resized_width == image.width && g.resized_height == image.height) {
        out.rgb.resize(static_cast<std::size_t>(g.width) * g.height * 3);
        for (int y = 0; y < g.height; ++y)
            std::copy_n(image.rgb.data() + (static_cast<std::size_t>(y + g.crop_top) * image.width + g.crop_left) * 3,
                        static_cast<std::size_t>(g.width) * 3, out.rgb.data() + static_cast<std::size_t>(y) * g.width * 3);
        return out;
    }
    // open_clip resizes the image as opened and converts it after: PIL resizes palette and
    // bilevel images NEAREST (which commutes with the palette lookup), RGBA and LA premultiplied,
    // CMYK as its ink bands, 16-bit grey as 32-bit integers.
    const bool as_opened = spec.pipeline_or_default() == PixelPipeline::OpenClip;
    ResizeFilter filter = spec.filter;
    if (as_opened && (image.mode == "P" || image.mode == "1")) filter = ResizeFilter::Nearest;
    const ResizeWindow window{g.crop_left, g.crop_top, g.width, g.height};
    const std::size_t n = static_cast<std::size_t>(g.width) * g.height;
    if (as_opened && !image.grey32.empty()) {
        const auto v = pil_resize_grey32(image.grey32, image.width, image.height, g.resized_width, g.resized_height, filter, window);
        out.rgb.resize(n * 3);
        for (std::size_t i = 0; i < n; ++i) out.rgb[3 * i] = out.rgb[3 * i + 1] = out.rgb[3 * i + 2] = pil::clip8(v[i]);
        return out;
    }
    if (as_opened && image.native_bands) {
        const int nb = image.native_bands;
        const bool alpha = image.mode != "CMYK";
        Bands in{image.width, image.height, nb, image.native};
        if (alpha)
            for (std::size_t i = 0; i < in.data.size(); i += nb) pil::premultiply(&in.data[i], nb);
        Bands r = pil_resize(in, g.resized_width, g.resized_height, filter, window);
        out.rgb.resize(n * 3);
        for (std::size_t i = 0; i < n; ++i) {
            std::uint8_t* p = &r.data[i * nb];
            if (!alpha) {
                pil::cmyk_to_rgb(p, &out.rgb[3 * i]);
                continue;
            }
            pil::unpremultiply(p, nb);
            for (int c = 0; c < 3; ++c) out.rgb[3 * i + c] = p[nb == 2 ? 0 : c];
        }
        return out;
    }
    Bands r = pil_resize(BandsView(image.rgb.data(), image.width, image.height, 3), g.resized_width, g.resized_height,
                         filter, window);
    out.rgb = std::move(r.data);
    return out;
}

namespace {

// torchvision's ToTensor then Normalize, in float32 and in its order.
float normalized(float v, float mean, float std) { return (v / 255.0f - mean) / std; }

}  // namespace

Pixels normalize(const Image& image, const std::array<float, 3>& mean, const std::array<float, 3>& std) {
    Pixels px;
    px.width = image.width;
    px.height = image.height;
    const std::size_t plane = static_cast<std::size_t>(image.width) * image.height;
    px.chw.resize(3 * plane);
    for (int c = 0; c < 3; ++c) {
        float table[256];  // one value per level: the same float32 steps, done once
        for (int v = 0; v < 256; ++v) table[v] = normalized(static_cast<float>(v), mean[c], std[c]);
        float* dst = px.chw.data() + c * plane;
        for (std::size_t i = 0; i < plane; ++i) dst[i] = table[image.rgb[3 * i + c]];
    }
    return px;
}

namespace {

// --resample torch: F.interpolate(bicubic, antialias=True) on the float image, rows and columns
// the crop keeps only, then the same normalization.
Pixels torch_resample(const Image& image, const Geometry& g, const std::array<float, 3>& mean,
                      const std::array<float, 3>& std) {
    const std::size_t n = static_cast<std::size_t>(image.width) * image.height * 3;
    std::vector<float> src(n);
    std::transform(image.rgb.begin(), image.rgb.begin() + static_cast<std::ptrdiff_t>(n), src.begin(),
                   [](std::uint8_t v) { return static_cast<float>(v); });
    std::vector<float> hwc;
    int stride_w = g.width, top = 0, left = 0;
    if (g.resized_width == image.width && g.resized_height == image.height) {
        hwc = std::move(src);  // no resampling: crop straight from the source
        stride_w = image.width;
        top = g.crop_top;
        left = g.crop_left;
    } else {
        auto ys = cubic_antialias_axis(image.height, g.resized_height);
        auto xs = cubic_antialias_axis(image.width, g.resized_width);
        ys = ResampleAxis(ys.begin() + g.crop_top, ys.begin() + g.crop_top + g.height);
        xs = ResampleAxis(xs.begin() + g.crop_left, xs.begin() + g.crop_left + g.width);
        hwc = resample_hwc(src.data(), image.height, image.width, 3, ys, xs);
    }
    Pixels px;
    px.width = g.width;
    px.height = g.height;
    px.chw.resize(static_cast<std::size_t>(3) * g.width * g.height);
    for (int c = 0; c < 3; ++c) {
        float* dst = px.chw.data() + static_cast<std::size_t>(c) * g.width * g.height;
        for (int y = 0; y < g.height; ++y)
            for (int x = 0; x < g.width; ++x)
                dst[static_cast<std::size_t>(y) * g.width + x] =
                    normalized(hwc[(static_cast<std::size_t>(y + top) * stride_w + x + left) * 3 + c], mean[c], std[c]);
    }
    return px;
}

}  // namespace

Pixels preprocess(const Image& image, const ResizeSpec& spec, int patch, const std::array<float, 3>& mean,
                  const std::array<float, 3>& std, const std::string& name, Geometry* geometry) {
    const Geometry g = plan_geometry(image.width, image.height, spec, patch, name);
    if (geometry) *geometry = g;
    if (spec.resampler == Resampler::Torch) return torch_resample(image, g, mean, std);
    return normalize(resize_and_crop(image, spec, g), mean, std);
}

DecodeOptions decode_options(const ResizeSpec& spec, int patch, const ImageLimits& limits, const std::string& name) {
    DecodeOptions o;
    o.limits = limits;
    o.exif_transpose = spec.exif_transpose;
    o.keep_native = spec.pipeline_or_default() == PixelPipeline::OpenClip;
    if (spec.draft)
        o.draft = [spec, patch, name](int w, int h) {
            const Geometry g = plan_geometry(w, h, spec, patch, name);
            return std::pair{g.resized_width, g.resized_height};
        };
    return o;
}

}  // namespace vitreg

namespace vitreg {

Pixels preprocess(const Image& image, const ResizeSpec& spec, const Config& config, const std::string& name,
                  Geometry* geometry) {
    return preprocess(image, spec.for_model(config), config.patch, config.mean, config.std, name, geometry);
}

Pixels load_pixels(const std::string& path, const ResizeSpec& spec, const Config& config, const ImageLimits& limits,
                   Geometry* geometry) {
    const ResizeSpec s = spec.for_model(config);
    const Image image = decode_image(path, decode_options(s, config.patch, limits, path));
    return preprocess(image, s, config.patch, config.mean, config.std, path, geometry);
}

Pixels load_pixels(const std::uint8_t* data, std::size_t size, const std::string& name, const ResizeSpec& spec,
                   const Config& config, const ImageLimits& limits) {
    const ResizeSpec s = spec.for_model(config);
    const Image image = decode_image_memory(data, size, name, decode_options(s, config.patch, limits, name));
    return preprocess(image, s, config.patch, config.mean, config.std, name);
}

}  // namespace vitreg
