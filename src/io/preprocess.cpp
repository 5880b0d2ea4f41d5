#include "vitreg/preprocess.hpp"

#include <algorithm>
#include <cmath>

#include "vitreg/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/resample.hpp"

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
    return r;
}

std::string ResizeSpec::to_string() const {
    switch (mode) {
        case Mode::Eval: return "eval";
        case Mode::None: return "none";
        case Mode::Exact: return std::to_string(width) + "x" + std::to_string(height);
        case Mode::Short: return "short:" + std::to_string(size);
        case Mode::Long: return "long:" + std::to_string(size);
    }
    return "?";
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
            // CenterCrop rounds half to even (Python round), as nearbyint does.
            const int kShort = spec.eval_resize, kCrop = spec.eval_crop;
            if (sw <= sh) {
                g.resized_width = kShort;
                g.resized_height = resized_side(static_cast<long long>(kShort) * sh / sw, name, sw, sh, spec, kShort);
            } else {
                g.resized_height = kShort;
                g.resized_width = resized_side(static_cast<long long>(kShort) * sw / sh, name, sw, sh, spec, kShort);
            }
            g.width = g.height = kCrop;
            g.crop_top = static_cast<int>(std::nearbyint((g.resized_height - kCrop) / 2.0));
            g.crop_left = static_cast<int>(std::nearbyint((g.resized_width - kCrop) / 2.0));
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

Pixels preprocess(const Image& image, const ResizeSpec& spec, int patch, const std::array<float, 3>& mean,
                  const std::array<float, 3>& std, const std::string& name, Geometry* geometry) {
    const Geometry g = plan_geometry(image.width, image.height, spec, patch, name);
    if (geometry) *geometry = g;
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
        // Resample only the rows and columns the crop keeps.
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
        const float a = 1.0f / (255.0f * std[c]), b = -mean[c] / std[c];
        float* dst = px.chw.data() + static_cast<std::size_t>(c) * g.width * g.height;
        for (int y = 0; y < g.height; ++y)
            for (int x = 0; x < g.width; ++x)
                dst[static_cast<std::size_t>(y) * g.width + x] =
                    hwc[(static_cast<std::size_t>(y + top) * stride_w + x + left) * 3 + c] * a + b;
    }
    return px;
}

}  // namespace vitreg

namespace vitreg {

Pixels preprocess(const Image& image, const ResizeSpec& spec, const Config& config, const std::string& name,
                  Geometry* geometry) {
    return preprocess(image, spec.for_model(config), config.patch, config.mean, config.std, name, geometry);
}

}  // namespace vitreg
