#include "core/resample.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "vector_loops.hpp"

namespace vitreg {

namespace {

// Keys' cubic convolution kernel with parameter A, |x| in [0, 2).
float cubic_kernel(float x, float a) {
    x = std::fabs(x);
    if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
    if (x < 2.0f) return (((x - 5.0f) * x + 8.0f) * x - 4.0f) * a;
    return 0.0f;
}

}  // namespace

namespace {

// The four taps of a bicubic (A = -0.75) sample at source coordinate `real`, clamped to the input.
ResampleTaps cubic_taps(float real, int in) {
    constexpr float A = -0.75f;
    const float fl = std::floor(real);
    const int idx = static_cast<int>(fl);
    const float t = real - fl;
    const float w[4] = {cubic_kernel(t + 1.0f, A), cubic_kernel(t, A), cubic_kernel(1.0f - t, A), cubic_kernel(2.0f - t, A)};
    ResampleTaps taps;
    for (int k = 0; k < 4; ++k) {
        taps.index.push_back(std::clamp(idx - 1 + k, 0, in - 1));
        taps.weight.push_back(w[k]);
    }
    return taps;
}

}  // namespace

ResampleAxis cubic_axis(int in, int out, float src_per_dst) {
    ResampleAxis axis(out);
    for (int i = 0; i < out; ++i) axis[i] = cubic_taps(src_per_dst * (static_cast<float>(i) + 0.5f) - 0.5f, in);
    return axis;
}

ResampleAxis cubic_corners_axis(int in, int out) {
    // PyTorch's scale for align_corners (0 for a single output).
    const float scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
    ResampleAxis axis(out);
    for (int i = 0; i < out; ++i) axis[i] = cubic_taps(scale * static_cast<float>(i), in);
    return axis;
}

ResampleAxis linear_axis(int in, int out) {
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    ResampleAxis axis(out);
    for (int i = 0; i < out; ++i) {
        const float real = std::max(scale * (static_cast<float>(i) + 0.5f) - 0.5f, 0.0f);
        const int i0 = std::min(static_cast<int>(real), in - 1), i1 = std::min(i0 + 1, in - 1);
        const float lambda = real - static_cast<float>(i0);
        axis[i].index = {i0, i1};
        axis[i].weight = {1.0f - lambda, lambda};
    }
    return axis;
}

ResampleAxis cubic_antialias_axis(int in, int out) {
    constexpr float A = -0.5f;
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    const float support = 2.0f * std::max(scale, 1.0f);
    const float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
    ResampleAxis axis(out);
    for (int i = 0; i < out; ++i) {
        const float center = scale * (static_cast<float>(i) + 0.5f);
        const int lo = std::max(static_cast<int>(center - support + 0.5f), 0);
        const int hi = std::min(static_cast<int>(center + support + 0.5f), in);
        auto& taps = axis[i];
        float total = 0.0f;
        for (int j = lo; j < hi; ++j) {
            const float w = cubic_kernel((static_cast<float>(j) - center + 0.5f) * invscale, A);
            taps.index.push_back(j);
            taps.weight.push_back(w);
            total += w;
        }
        if (total != 0.0f)
            for (auto& w : taps.weight) w /= total;
    }
    return axis;
}

std::vector<float> resample_hwc(const float* src, int in_h, int in_w, int channels, const ResampleAxis& ys,
                                const ResampleAxis& xs) {
    const int out_h = static_cast<int>(ys.size()), out_w = static_cast<int>(xs.size());
    const std::size_t c = static_cast<std::size_t>(channels);
    // W pass: [in_h, out_w, C].
    std::vector<float> mid(static_cast<std::size_t>(in_h) * out_w * c, 0.0f);
    for (int y = 0; y < in_h; ++y) {
        const float* row = src + static_cast<std::size_t>(y) * in_w * c;
        float* dst_row = mid.data() + static_cast<std::size_t>(y) * out_w * c;
        for (int x = 0; x < out_w; ++x) {
            float* d = dst_row + x * c;
            const auto& t = xs[x];
            for (std::size_t k = 0; k < t.index.size(); ++k) {
                const float* s = row + static_cast<std::size_t>(t.index[k]) * c;
                const float w = t.weight[k];
                for (std::size_t ch = 0; ch < c; ++ch) d[ch] += w * s[ch];
            }
        }
    }
    // H pass: [out_h, out_w, C].
    std::vector<float> out(static_cast<std::size_t>(out_h) * out_w * c, 0.0f);
    const std::size_t row_len = static_cast<std::size_t>(out_w) * c;
    const loops::Table& vec = loops::active();
    for (int y = 0; y < out_h; ++y) {
        float* d = out.data() + y * row_len;
        const auto& t = ys[y];
        for (std::size_t k = 0; k < t.index.size(); ++k) {
            vec.axpy(t.weight[k], mid.data() + static_cast<std::size_t>(t.index[k]) * row_len, d, row_len);
        }
    }
    return out;
}

}  // namespace vitreg
