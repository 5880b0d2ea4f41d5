#include "vitreg/dense_view.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/aligned_memory.hpp"
#include "core/aligned_memory.hpp"
#include "core/parse_number.hpp"
#include "core/resample.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// "--window 500 is not a multiple of the patch 14: try 490 or 504".
void check_multiple(const char* option, int value, int patch) {
    if (value % patch == 0) return;
    const int below = value / patch * patch, above = below + patch;
    throw UsageError(std::string(option) + " " + std::to_string(value) + " is not a multiple of the patch size " +
                     std::to_string(patch) + ": use " + (below > 0 ? std::to_string(below) + " or " : "") +
                     std::to_string(above));
}

// Each channel plane of a [3, h, w] image resampled bilinearly (align_corners=False, no antialias).
std::vector<float> resize_chw(const std::vector<float>& chw, int h, int w, int out_h, int out_w) {
    if (h == out_h && w == out_w) return chw;
    const ResampleAxis ys = linear_axis(h, out_h), xs = linear_axis(w, out_w);
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(3) * out_h * out_w);
    for (int c = 0; c < 3; ++c) {
        const auto plane = resample_hwc(chw.data() + static_cast<std::size_t>(c) * h * w, h, w, 1, ys, xs);
        out.insert(out.end(), plane.begin(), plane.end());
    }
    return out;
}

void mirror_chw(std::vector<float>& chw, int h, int w) {
    for (int r = 0; r < 3 * h; ++r) std::reverse(chw.begin() + static_cast<std::ptrdiff_t>(r) * w, chw.begin() + static_cast<std::ptrdiff_t>(r + 1) * w);
}

// The grid of one scale (and flip): its crops as one batch, pasted and divided by coverage.
DenseGrid windowed_grid(const Model& model, const std::vector<float>& chw, int h, int w, const Probe& probe,
                        const DenseView& view, const ForwardOptions& options) {
    const int patch = model.config().patch;
    const int crop_h = view.window > 0 ? std::min(view.window, h) : h, crop_w = view.window > 0 ? std::min(view.window, w) : w;
    const int stride = view.stride > 0 ? view.stride : std::max(view.window, 1);
    const auto ys = view.window > 0 ? window_starts(h, crop_h, stride) : std::vector<int>{0};
    const auto xs = view.window > 0 ? window_starts(w, crop_w, stride) : std::vector<int>{0};
    const int crops = static_cast<int>(ys.size() * xs.size());
    const std::size_t crop_plane = static_cast<std::size_t>(crop_h) * crop_w;
    // Huge pages: at a 2048 px image's 36 crops, the batch is 116 MB, and the page faults of 4 KB
    // pages cost a tenth of the crops' forwards (a virtual machine's faults are dear).
    gemm::Buffer batch(static_cast<std::size_t>(crops) * 3 * crop_plane);
    int k = 0;
    for (const int y0 : ys)
        for (const int x0 : xs) {
            float* dst = batch.data() + static_cast<std::size_t>(k++) * 3 * crop_plane;
            for (int c = 0; c < 3; ++c)
                for (int y = 0; y < crop_h; ++y) {
                    const float* src = chw.data() + (static_cast<std::size_t>(c) * h + y0 + y) * w + x0;
                    std::copy(src, src + crop_w, dst + (static_cast<std::size_t>(c) * crop_h + y) * crop_w);
                }
        }
    Trace trace;
    model.forward(batch.data(), crops, crop_h, crop_w, probe, trace, options);

    DenseGrid g;
    g.layers = static_cast<int>(trace.block_layers.size());
    g.height = h / patch;
    g.width = w / patch;
    g.dim = trace.dim;
    const int ch = crop_h / patch, cw = crop_w / patch, D = g.dim;
    g.data.assign(static_cast<std::size_t>(g.layers) * g.height * g.width * D, 0.0f);
    std::vector<int> cover(static_cast<std::size_t>(g.height) * g.width, 0);
    k = 0;
    for (const int y0 : ys)
        for (const int x0 : xs) {
            const int top = y0 / patch, left = x0 / patch;
            for (int r = 0; r < ch; ++r)
                for (int q = 0; q < cw; ++q) ++cover[static_cast<std::size_t>(top + r) * g.width + left + q];
            for (int l = 0; l < g.layers; ++l) {
                const float* tokens = trace.block_of(l, k) + static_cast<std::size_t>(trace.patch_offset()) * D;
                float* layer = g.data.data() + static_cast<std::size_t>(l) * g.height * g.width * D;
                for (int r = 0; r < ch; ++r)
                    for (int q = 0; q < cw; ++q) {
                        const float* from = tokens + (static_cast<std::size_t>(r) * cw + q) * D;
                        float* to = layer + (static_cast<std::size_t>(top + r) * g.width + left + q) * D;
                        for (int d = 0; d < D; ++d) to[d] += from[d];
                    }
            }
            ++k;
        }
    const std::size_t cells = cover.size();
    for (int l = 0; l < g.layers; ++l)
        for (std::size_t p = 0; p < cells; ++p) {
            float* cell = g.data.data() + (static_cast<std::size_t>(l) * cells + p) * D;
            if (cover[p] > 1)
                for (int d = 0; d < D; ++d) cell[d] /= static_cast<float>(cover[p]);
        }
    return g;
}

void mirror_grid(DenseGrid& g) {
    const std::size_t D = static_cast<std::size_t>(g.dim);
    for (int l = 0; l < g.layers; ++l)
        for (int r = 0; r < g.height; ++r) {
            float* row = g.data.data() + ((static_cast<std::size_t>(l) * g.height + r) * g.width) * D;
            for (int a = 0, b = g.width - 1; a < b; ++a, --b) std::swap_ranges(row + a * D, row + (a + 1) * D, row + b * D);
        }
}

}  // namespace

bool DenseView::plain() const {
    return window == 0 && scales == std::vector<double>{1.0} && !flip && grid_h == 0 && grid_w == 0;
}

void DenseView::check(int patch) const {
    if (window < 0) throw UsageError("--window " + std::to_string(window) + " must be positive");
    if (stride != 0 && window == 0) throw UsageError("--stride needs --window (the crop size in pixels)");
    if (window > 0) {
        check_multiple("--window", window, patch);
        if (stride < 0) throw UsageError("--stride " + std::to_string(stride) + " must be positive");
        if (stride > 0) check_multiple("--stride", stride, patch);
        if (stride > window)
            throw UsageError("--stride " + std::to_string(stride) + " is larger than --window " + std::to_string(window) +
                             ": crops would leave gaps (use a stride of at most " + std::to_string(window) + ")");
    }
    if (scales.empty()) throw UsageError("--image-scales: give at least one scale");
    for (const double s : scales)
        if (!(s > 0) || !(s <= 16)) {
            std::ostringstream text;
            text << s;
            throw UsageError("--image-scales: scale " + text.str() + " must be above 0 and at most 16");
        }
    if (grid_h < 0 || grid_w < 0 || (grid_h == 0) != (grid_w == 0)) throw UsageError("--grid must be HxW with H, W >= 1");
}

void DenseView::parse_scales(const std::string& text) {
    scales.clear();
    for (const auto& part : split(text, ',')) {
        const auto v = parse_real(part, -1e9, 1e9);
        if (!v) throw UsageError("--image-scales '" + text + "': '" + part + "' is not a number (expected e.g. 0.5,1,1.5)");
        if (!(*v > 0 && *v <= 16)) throw UsageError("--image-scales '" + text + "': scale " + part + " must be above 0 and at most 16");
        scales.push_back(*v);
    }
}

void DenseView::parse_grid(const std::string& text) {
    const auto parts = split(text, 'x');
    const auto h = parts.size() == 2 ? parse_integer(parts[0], 1, 65536) : std::nullopt;
    const auto w = parts.size() == 2 ? parse_integer(parts[1], 1, 65536) : std::nullopt;
    if (!h || !w) throw UsageError("--grid '" + text + "': expected HxW in patches, e.g. 32x48");
    grid_h = static_cast<int>(*h);
    grid_w = static_cast<int>(*w);
}

nlohmann::ordered_json DenseView::to_json() const {
    return {{"window", window},
            {"stride", window > 0 ? (stride > 0 ? stride : window) : 0},
            {"scales", scales},
            {"flip", flip},
            {"grid", grid_h > 0 ? nlohmann::ordered_json{grid_h, grid_w} : nlohmann::ordered_json("image")}};
}

std::vector<int> window_starts(int extent, int crop, int stride) {
    crop = std::min(crop, extent);
    const int count = std::max(extent - crop + stride - 1, 0) / stride + 1;
    std::vector<int> starts;
    for (int i = 0; i < count; ++i) {
        const int end = std::min(i * stride + crop, extent);
        starts.push_back(std::max(end - crop, 0));
    }
    return starts;
}

std::pair<int, int> scaled_size(int height, int width, double scale, int patch) {
    auto side = [&](int n) { return std::max(1, static_cast<int>(std::lround(n * scale / patch))) * patch; };
    return {side(height), side(width)};
}

void check_view_tokens(const Model& model, int height, int width, const DenseView& view, std::int64_t max_tokens,
                       const std::string& name) {
    const int patch = model.config().patch;
    for (const double s : view.scales) {
        auto [h, w] = scaled_size(height, width, s, patch);
        if (view.window > 0) h = std::min(h, view.window), w = std::min(w, view.window);
        model.check_tokens(h, w, max_tokens, name);
    }
}

DenseGrid dense_grid(const Model& model, const Pixels& pixels, const Probe& probe, const DenseView& view,
                     const ForwardOptions& options) {
    const int patch = model.config().patch;
    view.check(patch);
    const int out_h = view.grid_h > 0 ? view.grid_h : pixels.height / patch;
    const int out_w = view.grid_w > 0 ? view.grid_w : pixels.width / patch;
    DenseGrid sum;
    int views = 0;
    for (const double s : view.scales) {
        const auto [h, w] = scaled_size(pixels.height, pixels.width, s, patch);
        // A copy only where the view changes the pixels (a scale, a flip): a 2048 px image is 50 MB.
        const bool as_given = h == pixels.height && w == pixels.width && !view.flip;
        std::vector<float> changed = as_given ? std::vector<float>{} : resize_chw(pixels.chw, pixels.height, pixels.width, h, w);
        const std::vector<float>& chw = as_given ? pixels.chw : changed;
        for (const bool mirrored : view.flip ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
            if (mirrored) mirror_chw(changed, h, w);
            DenseGrid g = windowed_grid(model, chw, h, w, probe, view, options);
            if (mirrored) mirror_grid(g);
            if (g.height != out_h || g.width != out_w) {
                const ResampleAxis ys = linear_axis(g.height, out_h), xs = linear_axis(g.width, out_w);
                const std::size_t plane = static_cast<std::size_t>(g.height) * g.width * g.dim;
                std::vector<float> resized;
                for (int l = 0; l < g.layers; ++l) {
                    const auto r = resample_hwc(g.data.data() + l * plane, g.height, g.width, g.dim, ys, xs);
                    resized.insert(resized.end(), r.begin(), r.end());
                }
                g.data = std::move(resized);
                g.height = out_h;
                g.width = out_w;
            }
            if (views++ == 0) {
                sum = std::move(g);
            } else {
                for (std::size_t i = 0; i < sum.data.size(); ++i) sum.data[i] += g.data[i];
            }
        }
    }
    if (views > 1)
        for (float& v : sum.data) v /= static_cast<float>(views);
    return sum;
}

}  // namespace vitreg
