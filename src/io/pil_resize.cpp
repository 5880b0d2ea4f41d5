#include "vitreg/pil_resize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's 8-bit coefficients: 22 fraction bits

struct Filter {
    double support;
    double (*weight)(double);
};

double box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double triangle(double x) {
    x = std::fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming(double x) {
    x = std::fabs(x);
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x *= M_PI;
    return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
}
double keys_cubic(double x) {  // a = -0.5
    constexpr double a = -0.5;
    x = std::fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}
double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return std::sin(x) / x;
}
double lanczos3(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

Filter filter_of(ResizeFilter f) {
    switch (f) {
        case ResizeFilter::Box: return {0.5, box};
        case ResizeFilter::Bilinear: return {1.0, triangle};
        case ResizeFilter::Hamming: return {1.0, hamming};
        case ResizeFilter::Bicubic: return {2.0, keys_cubic};
        case ResizeFilter::Lanczos: return {3.0, lanczos3};
        case ResizeFilter::Nearest: break;
    }
    throw Error("nearest is not a convolution filter");
}

// One axis's taps for the output indices [first, first + count): PIL's precompute_coeffs (double
// weights, normalized by their sum). Tap j of index i weighs input start[i] + j.
struct Taps {
    int width = 0;  // taps per index (PIL's ksize)
    std::vector<int> start, count;
    std::vector<double> weight;  // [index][width]
};

Taps taps_for(int in_size, int out_size, int first, int count, const Filter& filter) {
    const double scale = static_cast<double>(in_size) / out_size;
    const double filterscale = std::max(scale, 1.0);
    const double support = filter.support * filterscale;
    Taps t;
    t.width = static_cast<int>(std::ceil(support)) * 2 + 1;
    t.start.resize(count);
    t.count.resize(count);
    t.weight.assign(static_cast<std::size_t>(count) * t.width, 0.0);
    for (int i = 0; i < count; ++i) {
        const int xx = first + i;
        const double center = (xx + 0.5) * scale;
        const double ss = 1.0 / filterscale;
        const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
        const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
        double* k = &t.weight[static_cast<std::size_t>(i) * t.width];
        double total = 0.0;
        for (int x = 0; x < xmax; ++x) {
            k[x] = filter.weight((x + xmin - center + 0.5) * ss);
            total += k[x];
        }
        if (total != 0.0)
            for (int x = 0; x < xmax; ++x) k[x] /= total;
        t.start[i] = xmin;
        t.count[i] = std::max(xmax, 0);
    }
    return t;
}

// PIL's normalize_coeffs_8bpc: the weights rounded to 22-bit fixed point.
std::vector<std::int32_t> fixed_point(const Taps& t) {
    std::vector<std::int32_t> w(t.weight.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double v = t.weight[i];
        w[i] = static_cast<std::int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    return w;
}

// PIL's two sample kinds. 8-bit bands: weights in 22-bit fixed point, sums in int32 from a half,
// clipped to a byte. 32-bit integer images (mode I): double weights and sums, rounded half away
// from zero (ROUND_UP).
struct Fixed8 {
    using Sample = std::uint8_t;
    using Acc = std::int32_t;
    using Weight = std::int32_t;
    static std::vector<Weight> weights(const Taps& t) { return fixed_point(t); }
    static constexpr Acc kStart = Acc(1) << (kPrecisionBits - 1);
    static Sample finish(Acc acc) {
        const Acc v = acc >> kPrecisionBits;  // arithmetic, as PIL's lookup index
        return static_cast<Sample>(v < 0 ? 0 : v > 255 ? 255 : v);
    }
};
struct Double32 {
    using Sample = std::int32_t;
    using Acc = double;
    using Weight = double;
    static const std::vector<Weight>& weights(const Taps& t) { return t.weight; }
    static constexpr Acc kStart = 0.0;
    static Sample finish(Acc v) { return static_cast<Sample>(v >= 0.0 ? std::floor(v + 0.5f) : -std::floor(std::fabs(v) + 0.5f)); }
};

// The horizontal pass: out[r][i] = finish(Σ_j w[i][j] in[r][start[i] + j]), each band.
template <class K, int B>
void horizontal(const typename K::Sample* in, std::ptrdiff_t in_row, typename K::Sample* out, const Taps& t, int rows,
                int bands) {
    const auto& weight = K::weights(t);
    const int n = static_cast<int>(t.start.size());
    const int nb = B ? B : bands;
    for (int r = 0; r < rows; ++r) {
        const auto* src = in + r * in_row;
        auto* dst = out + static_cast<std::ptrdiff_t>(r) * n * nb;
        for (int i = 0; i < n; ++i) {
            const auto* w = &weight[static_cast<std::size_t>(i) * t.width];
            const auto* s = src + t.start[i] * nb;
            typename K::Acc acc[4] = {K::kStart, K::kStart, K::kStart, K::kStart};
            for (int j = 0; j < t.count[i]; ++j, s += nb)
                for (int b = 0; b < nb; ++b) acc[b] += s[b] * w[j];
            for (int b = 0; b < nb; ++b) dst[i * nb + b] = K::finish(acc[b]);
        }
    }
}

#if defined(__SSE4_1__)
// 8-bit RGB, each tap's three bands in one 4-lane multiply-add: the fourth lane reads the next
// pixel's first byte and is dropped (integer sums are the same in any grouping). The one tap
// whose 4-byte load would pass `end` is summed alone.
void horizontal_rgb8(const std::uint8_t* in, std::ptrdiff_t in_row, std::uint8_t* out, const Taps& t, int rows,
                     const std::uint8_t* end) {
    const std::vector<std::int32_t> weight = fixed_point(t);
    const int n = static_cast<int>(t.start.size());
    for (int r = 0; r < rows; ++r) {
        const std::uint8_t* src = in + r * in_row;
        std::uint8_t* dst = out + static_cast<std::ptrdiff_t>(r) * n * 3;
        for (int i = 0; i < n; ++i) {
            const std::int32_t* w = &weight[static_cast<std::size_t>(i) * t.width];
            const std::uint8_t* s = src + t.start[i] * 3;
            const int count = t.count[i];
            const int loads = count > 0 && s + 3 * count >= end ? count - 1 : count;
            __m128i acc = _mm_set1_epi32(Fixed8::kStart);
            for (int j = 0; j < loads; ++j) {
                std::int32_t v;
                std::memcpy(&v, s + 3 * j, 4);
                const __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
                acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(w[j])));
            }
            alignas(16) std::int32_t a[4];
            _mm_store_si128(reinterpret_cast<__m128i*>(a), acc);
            for (int j = loads; j < count; ++j)
                for (int b = 0; b < 3; ++b) a[b] += s[3 * j + b] * w[j];
            for (int b = 0; b < 3; ++b) dst[i * 3 + b] = Fixed8::finish(a[b]);
        }
    }
}
#endif

template <class K>
void horizontal_pass(const typename K::Sample* in, std::ptrdiff_t in_row, typename K::Sample* out, const Taps& t, int rows,
                     int bands, const typename K::Sample* end) {
#if defined(__SSE4_1__)
    if constexpr (std::is_same_v<K, Fixed8>)
        if (bands == 3) return horizontal_rgb8(in, in_row, out, t, rows, end);
#endif
    (void)end;
    switch (bands) {  // the common band counts unrolled
        case 3: return horizontal<K, 3>(in, in_row, out, t, rows, bands);
        case 1: return horizontal<K, 1>(in, in_row, out, t, rows, bands);
        default: return horizontal<K, 0>(in, in_row, out, t, rows, bands);
    }
}

// The vertical pass, a whole row at a time: the same sums in the same order as PIL's
// per-pixel loop.
template <class K>
void vertical_pass(const typename K::Sample* in, std::ptrdiff_t in_row, typename K::Sample* out, std::size_t row_len,
                   const Taps& t) {
    const auto& weight = K::weights(t);
    std::vector<typename K::Acc> acc(row_len);
    for (std::size_t i = 0; i < t.start.size(); ++i) {
        std::fill(acc.begin(), acc.end(), K::kStart);
        const auto* w = &weight[i * t.width];
        for (int j = 0; j < t.count[i]; ++j) {
            const auto* s = in + (t.start[i] + j) * in_row;
            const auto wj = w[j];
            for (std::size_t x = 0; x < row_len; ++x) acc[x] += s[x] * wj;
        }
        auto* d = out + i * row_len;
        for (std::size_t x = 0; x < row_len; ++x) d[x] = K::finish(acc[x]);
    }
}

// PIL's NEAREST resize is an affine scaling whose source positions accumulate in double:
// x0 = scale / 2, then += scale per output index (ImagingScaleAffine).
std::vector<int> nearest_positions(int in_size, int out_size) {
    const double scale = static_cast<double>(in_size) / out_size;
    std::vector<int> at(out_size);
    double x = scale * 0.5;
    for (int i = 0; i < out_size; ++i, x += scale) at[i] = std::min(x < 0.0 ? 0 : static_cast<int>(x), in_size - 1);
    return at;
}

template <class T>
std::vector<T> nearest(const T* in, int width, int height, int bands, int out_width, int out_height, const ResizeWindow& w) {
    const auto xs = nearest_positions(width, out_width), ys = nearest_positions(height, out_height);
    std::vector<T> out(static_cast<std::size_t>(w.width) * w.height * bands);
    T* d = out.data();
    for (int y = 0; y < w.height; ++y) {
        const T* row = in + static_cast<std::size_t>(ys[w.top + y]) * width * bands;
        for (int x = 0; x < w.width; ++x, d += bands) std::copy_n(row + xs[w.left + x] * bands, bands, d);
    }
    return out;
}

// PIL's ImagingResample: rows of the input the window's output rows read (ybox_first, ybox_last),
// the horizontal pass into an intermediate of those rows, then the vertical pass; a pass whose
// axis keeps its size is skipped.
template <class K>
std::vector<typename K::Sample> resample(const typename K::Sample* in, int width, int height, int bands, int out_width,
                                         int out_height, ResizeFilter filter, ResizeWindow window) {
    using T = typename K::Sample;
    if (window.width == 0) window = {0, 0, out_width, out_height};
    if (width <= 0 || height <= 0 || out_width <= 0 || out_height <= 0 || bands < 1 || bands > 4 || window.left < 0 ||
        window.top < 0 || window.width <= 0 || window.height <= 0 || window.left + window.width > out_width ||
        window.top + window.height > out_height)
        throw Error("pil_resize: bad sizes");
    if (filter == ResizeFilter::Nearest) return nearest(in, width, height, bands, out_width, out_height, window);
    const Filter f = filter_of(filter);
    Taps rows;
    int row_first = window.top, row_count = window.height;
    const bool vertical = out_height != height;
    if (vertical) {
        rows = taps_for(height, out_height, window.top, window.height, f);
        row_first = rows.start.front();
        row_count = rows.start.back() + rows.count.back() - row_first;
        for (int& s : rows.start) s -= row_first;
    }
    std::vector<T> mid;
    const T* mid_data = in + static_cast<std::size_t>(row_first) * width * bands;
    std::ptrdiff_t mid_row = static_cast<std::ptrdiff_t>(width) * bands;
    if (out_width != width) {
        const Taps cols = taps_for(width, out_width, window.left, window.width, f);
        mid.resize(static_cast<std::size_t>(window.width) * row_count * bands);
        horizontal_pass<K>(mid_data, mid_row, mid.data(), cols, row_count, bands,
                           in + static_cast<std::size_t>(width) * height * bands);
        mid_data = mid.data();
        mid_row = static_cast<std::ptrdiff_t>(window.width) * bands;
    } else {
        mid_data += static_cast<std::ptrdiff_t>(window.left) * bands;
    }
    const std::size_t row_len = static_cast<std::size_t>(window.width) * bands;
    std::vector<T> out(row_len * window.height);
    if (vertical) {
        vertical_pass<K>(mid_data, mid_row, out.data(), row_len, rows);
    } else {
        for (int y = 0; y < window.height; ++y) std::copy_n(mid_data + y * mid_row, row_len, out.data() + y * row_len);
    }
    return out;
}

}  // namespace

std::string to_string(ResizeFilter f) { return name_of(f); }

ResizeFilter parse_resize_filter(const std::string& s) {
    if (auto f = find_enum<ResizeFilter>(s)) return *f;
    throw UsageError("unknown resize filter '" + s + "' (" + enum_choices<ResizeFilter>() + ")");
}

Bands pil_resize(const BandsView& in, int out_width, int out_height, ResizeFilter filter, ResizeWindow window) {
    Bands out;
    out.data = resample<Fixed8>(in.data, in.width, in.height, in.bands, out_width, out_height, filter, window);
    out.width = window.width ? window.width : out_width;
    out.height = window.width ? window.height : out_height;
    out.bands = in.bands;
    return out;
}

std::vector<std::int32_t> pil_resize_grey32(const std::vector<std::int32_t>& in, int width, int height, int out_width,
                                            int out_height, ResizeFilter filter, ResizeWindow window) {
    if (in.size() != static_cast<std::size_t>(width) * height) throw Error("pil_resize_grey32: bad sizes");
    return resample<Double32>(in.data(), width, height, 1, out_width, out_height, filter, window);
}

}  // namespace vitreg
