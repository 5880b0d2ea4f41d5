// The packed GEMM kernels (every one this CPU can run) against a double-precision product,
// on shapes that leave remainders in rows, panels and k.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "gemm.hpp"
#include "kernels.hpp"

using namespace vitreg::gemm;

TEST_CASE("packed GEMM equals the exact product for every kernel and odd shapes") {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    for (const Isa isa : {Isa::Avx512, Isa::Avx2, Isa::Portable}) {
        if (!supported(isa)) continue;
        for (const auto [m, k, n] : {std::tuple{1, 1, 1}, {13, 7, 33}, {25, 64, 17}, {96, 384, 200}, {5, 130, 64}}) {
            INFO("isa " << static_cast<int>(isa) << " m " << m << " k " << k << " n " << n);
            std::vector<float> a(m * k), b(k * n), bt(n * k);
            for (auto& v : a) v = normal(rng);
            for (auto& v : b) v = normal(rng);
            for (int i = 0; i < k; ++i)
                for (int j = 0; j < n; ++j) bt[j * k + i] = b[i * n + j];
            const PackedMatrix p = pack(b.data(), k, n, n, isa);
            PackedMatrix pt;
            pack_transposed_into(pt, bt.data(), n, k, k, 1.0f, isa);
            CHECK(p.isa == isa);
            // The whole product, and a column range starting at the second panel.
            std::vector<float> c(m * n, -1.0f), ct(m * n, -1.0f);
            multiply(a.data(), k, m, p, 0, n, c.data(), n);
            multiply(a.data(), k, m, pt, 0, n, ct.data(), n);
            CHECK(c == ct);
            const int c0 = std::min(p.nr, n);
            std::vector<float> part(m * n, 7.0f);
            multiply(a.data(), k, m, p, c0, n, part.data() + c0, n);
            double worst = 0;
            for (int i = 0; i < m; ++i)
                for (int j = 0; j < n; ++j) {
                    double exact = 0;
                    for (int q = 0; q < k; ++q) exact += double(a[i * k + q]) * b[q * n + j];
                    worst = std::max(worst, std::abs(exact - c[i * n + j]) / (1.0 + std::sqrt(double(k))));
                    if (j >= c0) CHECK(part[i * n + j] == c[i * n + j]);
                    else CHECK(part[i * n + j] == 7.0f);  // columns outside the range untouched
                }
            CHECK(worst < 1e-5);
        }
    }
}

// The vector kernels promise each element as one FMA chain over k in order (what makes results
// independent of tiling and thread count, and AVX2 equal to AVX-512): checked bit for bit on
// every strip height, both AVX-512 panel widths and k that leaves each remainder of the unrolled
// loop, with A read in place and, where the kernel has them, as packed strips.
TEST_CASE("the AVX kernels give each element as one FMA chain over k, bit for bit") {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    for (const Isa isa : {Isa::Avx512, Isa::Avx2}) {
        if (!supported(isa)) continue;
        for (const int n : {48, 64, 50})
            for (const int k : {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 67})
                for (int m = 1; m <= 9; ++m) {
                    INFO("isa " << static_cast<int>(isa) << " m " << m << " k " << k << " n " << n);
                    std::vector<float> a(m * k), b(k * n), bias(n), c(m * n);
                    for (auto* v : {&a, &b, &bias})
                        for (auto& x : *v) x = normal(rng);
                    for (auto& x : c) x = normal(rng);
                    const std::vector<float> residual = c;
                    std::vector<float> scale(n, 0.5f);
                    const PackedMatrix p = pack(b.data(), k, n, n, isa);
                    const Epilogue e{bias.data(), scale.data()};
                    multiply(a.data(), k, m, p, 0, n, c.data(), n, e);
                    // The kernels that read A packed as strips (AVX2), on the same shapes.
                    std::vector<float> from_strips = residual;
                    if (const int strip = packed_strip(p)) {
                        std::vector<float> ap(a.size());
                        pack_rows(a.data(), k, m, k, strip, ap.data());
                        multiply_packed(ap.data(), m, p, 0, n, from_strips.data(), n, e);
                        CHECK(from_strips == c);
                    }
                    int differ = 0;
                    for (int i = 0; i < m; ++i)
                        for (int j = 0; j < n; ++j) {
                            float sum = 0.0f;
                            for (int q = 0; q < k; ++q) sum = std::fma(a[i * k + q], b[q * n + j], sum);
                            differ += c[i * n + j] != std::fma(scale[j], sum + bias[j], residual[i * n + j]);
                        }
                    CHECK(differ == 0);
                }
    }
}

TEST_CASE("the fused epilogue adds the bias, or scales and accumulates into C, for every kernel") {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    for (const Isa isa : {Isa::Avx512, Isa::Avx2, Isa::Portable}) {
        if (!supported(isa)) continue;
        for (const auto [m, k, n] : {std::tuple{9, 20, 50}, {14, 33, 64}, {3, 5, 7}}) {
            INFO("isa " << static_cast<int>(isa) << " m " << m << " k " << k << " n " << n);
            std::vector<float> a(m * k), b(k * n), bias(n), scale(n), residual(m * n);
            for (auto* v : {&a, &b, &bias, &scale, &residual})
                for (auto& x : *v) x = normal(rng);
            const PackedMatrix p = pack(b.data(), k, n, n, isa);
            std::vector<float> biased(m * n, -1.0f), accumulated = residual;
            multiply(a.data(), k, m, p, 0, n, biased.data(), n, Epilogue{bias.data(), nullptr});
            multiply(a.data(), k, m, p, 0, n, accumulated.data(), n, Epilogue{bias.data(), scale.data()});
            double worst_bias = 0, worst_residual = 0;
            for (int i = 0; i < m; ++i)
                for (int j = 0; j < n; ++j) {
                    double y = bias[j];
                    for (int q = 0; q < k; ++q) y += double(a[i * k + q]) * b[q * n + j];
                    const double want = residual[i * n + j] + double(scale[j]) * y;
                    worst_bias = std::max(worst_bias, std::abs(y - biased[i * n + j]));
                    worst_residual = std::max(worst_residual, std::abs(want - accumulated[i * n + j]));
                }
            CHECK(worst_bias < 1e-4);
            CHECK(worst_residual < 1e-4);
        }
    }
}

TEST_CASE("LayerNorm gives the same bits wherever its rows sit in memory") {
    // A Trace's blocks are normed where they lie; an alignment-dependent reduction made
    // `vitreg dense --norm --layers -2,-1` differ from run to run.
    constexpr int kWidth = 192, kRows = 3;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.5f, 2.0f);
    std::vector<float> buffer(kRows * kWidth + 32);
    vitreg::kernels::Norm norm{Eigen::VectorXf::Random(kWidth), Eigen::VectorXf::Random(kWidth)};
    std::vector<float> rows(kRows * kWidth);
    for (auto& v : rows) v = normal(rng);
    std::vector<float> first;
    for (int offset = 0; offset < 16; ++offset) {
        INFO("offset " << offset << " floats");
        float* at = buffer.data() + offset;
        std::copy(rows.begin(), rows.end(), at);
        vitreg::kernels::layer_norm(at, kRows, kWidth, norm, 1e-6f, at);
        std::vector<float> got(at, at + kRows * kWidth);
        if (first.empty()) first = got;
        CHECK(got == first);
    }
    // and it is a LayerNorm: zero mean, unit variance before the affine part
    std::vector<float> plain(rows);
    vitreg::kernels::Norm unit{Eigen::VectorXf::Ones(kWidth), Eigen::VectorXf::Zero(kWidth)};
    vitreg::kernels::layer_norm(plain.data(), kRows, kWidth, unit, 0.0f, plain.data());
    double mean = 0, square = 0;
    for (int i = 0; i < kWidth; ++i) mean += plain[i], square += double(plain[i]) * plain[i];
    CHECK(std::abs(mean / kWidth) < 1e-5);
    CHECK(std::abs(square / kWidth - 1.0) < 1e-4);
}

TEST_CASE("A packed as strips gives the in-place product bit for bit, epilogue included") {
    std::mt19937 rng(13);
    std::normal_distribution<float> normal;
    for (const Isa isa : {Isa::Avx512, Isa::Avx2, Isa::Portable}) {
        if (!supported(isa)) continue;
        for (const auto [m, k, n] : {std::tuple{1, 1, 1}, {13, 7, 33}, {96, 384, 200}, {100, 65, 48}}) {
            std::vector<float> a(m * k), b(k * n), bias(n), scale(n), residual(m * n);
            for (auto* v : {&a, &b, &bias, &scale, &residual})
                for (auto& x : *v) x = normal(rng);
            const PackedMatrix q = pack(b.data(), k, n, n, isa);
            const int strip = packed_strip(q);
            INFO("isa " << static_cast<int>(isa) << " m " << m << " k " << k << " n " << n << " strip " << strip);
            if (!strip) continue;  // this kernel reads A in place
            std::vector<float> ap(static_cast<std::size_t>(m) * k, NAN);
            pack_rows(a.data(), k, m, k, strip, ap.data());
            for (const bool fused : {false, true}) {
                const Epilogue e = fused ? Epilogue{bias.data(), scale.data()} : Epilogue{};
                std::vector<float> want = residual, got = residual;
                multiply(a.data(), k, m, q, 0, n, want.data(), n, e);
                multiply_packed(ap.data(), m, q, 0, n, got.data(), n, e);
                CHECK(got == want);
            }
        }
    }
}
