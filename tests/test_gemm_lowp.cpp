// The bf16 and int8 GEMM kernels (every one this CPU can run) against a double-precision
// product of the same quantized operands, on shapes that leave remainders in rows, panels,
// and k groups. Integer results must be equal, and every kernel must give the same bits.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "gemm_lowp.hpp"
#include "transpose.hpp"

using namespace vitreg::gemm;
using vitreg::quant::AffineU8;
using vitreg::quant::round_bf16;

namespace {

// Rows 1–8 (every tile height of the 8-row kernels) and k leaving each remainder of the
// assembly loop's four groups per iteration (int8: four values a group, bf16: two).
constexpr std::tuple<int, int, int> kShapes[] = {{1, 1, 1},    {2, 9, 20},     {3, 28, 48},    {4, 11, 49},
                                                 {6, 45, 17},  {7, 12, 40},    {13, 7, 33},    {9, 64, 50},
                                                 {25, 130, 97}, {96, 384, 200}, {5, 33, 75}};

}  // namespace

TEST_CASE("bf16 GEMM is the fp32 product of the bf16-rounded operands, the same bits on every kernel") {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    for (const auto [m, k, n] : kShapes) {
        std::vector<float> a(m * k), b(k * n), bt(n * k), bias(n), scale(n), residual(m * n);
        for (auto* v : {&a, &b, &bias, &scale, &residual})
            for (auto& x : *v) x = normal(rng);
        for (int i = 0; i < k; ++i)
            for (int j = 0; j < n; ++j) bt[j * k + i] = b[i * n + j];
        std::vector<std::uint32_t> pairs(static_cast<std::size_t>(m) * ((k + 1) / 2));
        round_rows_bf16(a.data(), k, m, k, pairs.data());
        std::vector<float> first;
        for (const Bf16Isa isa : {Bf16Isa::Amx, Bf16Isa::Avx512Bf16, Bf16Isa::Portable}) {
            if (!supported(isa)) continue;
            INFO(to_string(isa) << " m " << m << " k " << k << " n " << n);
            PackedBf16 p, pt, pw;
            pack_into(p, b.data(), k, n, n, isa);
            pack_transposed_into(pt, bt.data(), n, k, k, 0.5f, isa);
            pack_weights_into(pw, bt.data(), n, k, isa);  // a linear's W = Bᵀ, packed in parallel at load
            CHECK(p.isa == isa);
            CHECK(pw.data == p.data);
            std::vector<float> c(m * n, -1.0f), ct(m * n), fused = residual;
            multiply(pairs.data(), m, p, 0, n, c.data(), n);
            multiply(pairs.data(), m, pt, 0, n, ct.data(), n);
            multiply(pairs.data(), m, p, 0, n, fused.data(), n, Epilogue{bias.data(), scale.data()});
            double worst = 0, worst_fused = 0;
            for (int i = 0; i < m; ++i)
                for (int j = 0; j < n; ++j) {
                    double exact = 0;
                    for (int q = 0; q < k; ++q) exact += double(round_bf16(a[i * k + q])) * round_bf16(b[q * n + j]);
                    const double bound = 1.0 + std::sqrt(double(k));
                    worst = std::max(worst, std::abs(exact - c[i * n + j]) / bound);
                    const double want = residual[i * n + j] + double(scale[j]) * (exact + bias[j]);
                    worst_fused = std::max(worst_fused, std::abs(want - fused[i * n + j]) / bound);
                    CHECK(ct[i * n + j] == 0.5f * c[i * n + j]);  // a power-of-two scale is exact
                }
            CHECK(worst < 1e-5);
            CHECK(worst_fused < 1e-5);
            // vdpbf16ps' order (odd k first, fp32 after each product) is replayed exactly; AMX's
            // tdpbf16ps rounds its sums otherwise (within the bound above, not bit for bit).
            if (isa == Bf16Isa::Amx) continue;
            if (first.empty()) first = c;
            CHECK(c == first);
        }
    }
}

TEST_CASE("int8 GEMM gives the exact integer product on every kernel, zero points included") {
    std::mt19937 rng(9);
    std::uniform_int_distribution<int> u8(0, 255);
    // (AMX: whole 32-row strips and a short one, k a multiple of 64 read in place and not.)
    for (const auto [m, k, n, bits] : {std::tuple{1, 1, 1, 8}, {13, 7, 33, 8}, {9, 64, 50, 7}, {25, 130, 97, 8},
                                       {96, 384, 200, 8}, {25, 130, 97, 7}, {96, 384, 200, 7}, {70, 256, 64, 8}}) {
        for (const int zp : {0, 3, 200}) {
            // Integer operands with scale 1: each column of B reaches ±qmax (127, or 63 for
            // 7-bit weights), so its scale is 1; A's values lie in [−zp, 255 − zp], quantized
            // with scale 1 and zero point zp. 255 · 63 · 2 is the largest pair vpmaddubsw sums.
            const int qmax = (1 << (bits - 1)) - 1;
            std::uniform_int_distribution<int> s8(-qmax, qmax);
            std::vector<float> a(m * k), b(k * n);
            for (auto& v : a) v = static_cast<float>(u8(rng) - zp);
            for (auto& v : b) v = static_cast<float>(s8(rng));
            for (int j = 0; j < n; ++j) b[(j % k) * n + j] = static_cast<float>((j % 2) ? qmax : -qmax);
            if (bits == 7 && k >= 2 && zp == 0)  // the saturating case: 255 · 63 + 255 · 63 in one pair
                for (int i = 0; i < m; ++i) a[i * k] = a[i * k + 1] = 255.0f, b[0] = b[n] = 63.0f;
            const int groups = (k + 3) / 4;
            std::vector<std::uint32_t> qa(static_cast<std::size_t>(m) * groups);
            std::vector<float> sa(m);
            std::vector<std::int32_t> za(m);
            const AffineU8 fixed{1.0f, zp};
            quantize_rows(a.data(), k, m, k, &fixed, qa.data(), sa.data(), za.data());
            for (const Int8Isa isa : {Int8Isa::Amx, Int8Isa::Avx512Vnni, Int8Isa::Avx256Vnni, Int8Isa::Avx512,
                                      Int8Isa::Avx2, Int8Isa::Avx2Maddubs, Int8Isa::Portable}) {
                if (!supported(isa) || (isa == Int8Isa::Avx2Maddubs && bits != 7)) continue;
                INFO(to_string(isa) << " m " << m << " k " << k << " n " << n << " zero point " << zp << " bits " << bits);
                const PackedInt8 p = pack_int8(b.data(), k, n, n, isa, bits);
                CHECK(p.isa == isa);
                for (int j = 0; j < n; ++j) REQUIRE(p.scale[j] == 1.0f);
                // A column range starting at the second panel leaves the first untouched.
                const int c0 = std::min(p.nr, n);
                std::vector<float> c(m * n, 7.0f);
                multiply(QuantizedRows{qa.data(), sa.data(), za.data()}, m, p, c0, n, c.data() + c0, n);
                long mismatches = 0;
                for (int i = 0; i < m; ++i)
                    for (int j = 0; j < n; ++j) {
                        long exact = 0;
                        for (int q = 0; q < k; ++q) exact += long(a[i * k + q]) * long(b[q * n + j]);
                        const float want = j >= c0 ? static_cast<float>(exact) : 7.0f;
                        mismatches += c[i * n + j] != want;
                    }
                CHECK(mismatches == 0);
            }
        }
    }
}

TEST_CASE("int8 GEMM: 8-bit weights of -128, which no quantizer writes, are exact on every 8-bit kernel") {
    // (A quantized file's 8-bit weights are not read at load: a -128 in one reaches the kernels.)
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> u8(0, 255), s8(-128, 127);
    const int m = 9, k = 70, n = 50, zp = 3, groups = (k + 3) / 4;
    std::vector<float> a(m * k);
    for (auto& v : a) v = static_cast<float>(u8(rng) - zp);
    std::vector<std::int8_t> q(static_cast<std::size_t>(n) * k);  // [n][k], W's rows
    for (auto& v : q) v = static_cast<std::int8_t>(s8(rng));
    for (int j = 0; j < n; ++j) q[static_cast<std::size_t>(j) * k + j % k] = -128;
    const std::vector<float> ones(n, 1.0f);
    std::vector<std::uint32_t> qa(static_cast<std::size_t>(m) * groups);
    std::vector<float> sa(m);
    std::vector<std::int32_t> za(m);
    const AffineU8 fixed{1.0f, zp};
    quantize_rows(a.data(), k, m, k, &fixed, qa.data(), sa.data(), za.data());
    for (const Int8Isa isa : {Int8Isa::Amx, Int8Isa::Avx512Vnni, Int8Isa::Avx256Vnni, Int8Isa::Avx512, Int8Isa::Avx2,
                              Int8Isa::Portable}) {
        if (!supported(isa)) continue;
        INFO(to_string(isa));
        const PackedInt8 p = pack_int8(q.data(), ones.data(), k, n, isa, 8);
        std::vector<float> c(m * n);
        multiply(QuantizedRows{qa.data(), sa.data(), za.data()}, m, p, 0, n, c.data(), n);
        long mismatches = 0;
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                long exact = 0;
                for (int t = 0; t < k; ++t) exact += long(a[i * k + t]) * long(q[static_cast<std::size_t>(j) * k + t]);
                mismatches += c[i * n + j] != static_cast<float>(exact);
            }
        CHECK(mismatches == 0);
    }
}

TEST_CASE("int8 weights in place: W's signed rows against the input's byte panels, exact integers") {
    if (!supported(Int8Isa::Avx512Vnni)) return;  // (the in-place kernel is vpdpbusd's)
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> u8(0, 255), s8(-128, 127);
    // Token counts ending in a full, a 16-, a 32- and a 64-wide panel; W's rows 1–8 and past a tile.
    for (const auto [on, k, m] : {std::tuple{1, 4, 1}, {8, 64, 48}, {3, 12, 49}, {13, 36, 75}, {20, 128, 130}, {9, 8, 96},
                                  {7, 16, 60}, {6, 20, 201}}) {
        INFO("rows " << on << " k " << k << " tokens " << m);
        const int groups = k / 4;
        std::vector<std::int8_t> w(static_cast<std::size_t>(on) * k);
        std::vector<std::uint8_t> x(static_cast<std::size_t>(m) * k);
        for (auto& v : w) v = static_cast<std::int8_t>(s8(rng));
        for (auto& v : x) v = static_cast<std::uint8_t>(u8(rng));
        w[0] = -128;  // (the kernel itself takes every signed byte)
        std::vector<std::uint32_t> rows(static_cast<std::size_t>(m) * groups);
        std::memcpy(rows.data(), x.data(), x.size());
        PackedRows panels;
        pack_rows(panels, m, groups, [&](int r0, int rn, std::uint32_t* out) {
            std::memcpy(out, rows.data() + static_cast<std::size_t>(r0) * groups, static_cast<std::size_t>(rn) * groups * 4);
        });
        const int rest = m - (m - 1) / 48 * 48;  // (a last 16 or fewer join a full panel before them)
        CHECK(panels.last_nr == (rest <= 16 && m > 48 ? 64 : rest <= 16 ? 16 : rest <= 32 ? 32 : 48));
        // Columns from the second panel on (where there is one), into a wider output whose other cells stay.
        const int c0 = panels.panels() > 1 ? panels.nr : 0, ldo = m + 2;
        std::vector<std::int32_t> out(static_cast<std::size_t>(on) * ldo, 7);
        multiply_rows(reinterpret_cast<const std::uint32_t*>(w.data()), on, panels, c0, m, out.data(), ldo);
        long mismatches = 0;
        for (int o = 0; o < on; ++o)
            for (int j = 0; j < ldo; ++j) {  // column j holds token c0 + j, up to m
                const int t = c0 + j;
                long want = 7;
                if (t < m) {
                    want = 0;
                    for (int q = 0; q < k; ++q) want += long(w[o * k + q]) * long(x[t * k + q]);
                }
                mismatches += out[static_cast<std::size_t>(o) * ldo + j] != want;
            }
        CHECK(mismatches == 0);
    }
}

TEST_CASE("an int8 row's sum and range in one pass") {
    std::vector<std::int8_t> q(200);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 255) - 127);
    long want = 0;
    for (const auto v : q) want += v;
    bool ok = false;
    CHECK(sum_s8(q.data(), q.size(), 127, &ok) == want);
    CHECK(ok);
    for (const std::size_t at : {std::size_t{3}, std::size_t{130}, std::size_t{199}}) {  // in a 64-byte step and in the tail
        auto bad = q;
        bad[at] = -128;
        CHECK(sum_s8(bad.data(), bad.size(), 127, &ok) == want - q[at] - 128);
        CHECK(!ok);
    }
    CHECK(sum_s8(q.data(), q.size(), 63, &ok) == want);
    CHECK(!ok);
}

TEST_CASE("int4 GEMM is the product of its dequantized operands on every kernel, the same bits on each") {
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.2f, 1.0f);
    // k: under one group, one whole group, groups and a short last one, k % 4 ≠ 0 among them.
    for (const auto [m, k, n] : {std::tuple{1, 1, 1}, {13, 7, 33}, {9, 128, 50}, {25, 130, 97}, {96, 384, 200}, {70, 301, 64}}) {
        std::vector<float> a(m * k), b(k * n);
        for (auto& v : a) v = normal(rng);
        for (auto& v : b) v = 0.1f * normal(rng);
        const int groups = (k + 3) / 4;
        std::vector<std::uint32_t> qa(static_cast<std::size_t>(m) * groups);
        std::vector<float> sa(m);
        std::vector<std::int32_t> za(m);
        quantize_rows(a.data(), k, m, k, nullptr, qa.data(), sa.data(), za.data());
        std::vector<std::int32_t> terms(static_cast<std::size_t>(m) * ((k + 127) / 128));
        int4_row_terms(QuantizedRows{qa.data(), sa.data(), za.data()}, m, k, terms.data());
        std::vector<float> first;
        for (const Int8Isa isa : {Int8Isa::Avx512Vnni, Int8Isa::Avx256Vnni, Int8Isa::Avx512, Int8Isa::Avx2,
                                  Int8Isa::Avx2Maddubs, Int8Isa::Portable}) {
            if (!supported(isa)) continue;
            INFO(to_string(isa) << " m " << m << " k " << k << " n " << n);
            const PackedInt4 p = pack_int4(b.data(), k, n, n, isa);
            REQUIRE(p.isa == isa);
            const std::vector<float> w = dequantize(p);
            const int c0 = n > 48 ? 48 : 0;  // a column range from a later panel on (nr is 16 or 48)
            std::vector<float> c(m * n, 7.0f);
            multiply(QuantizedRows{qa.data(), sa.data(), za.data(), terms.data()}, m, p, c0, n, c.data() + c0, n);
            long far = 0;
            for (int i = 0; i < m; ++i)
                for (int j = 0; j < n; ++j) {
                    double exact = 0, magnitude = 0;
                    const auto* u = reinterpret_cast<const std::uint8_t*>(qa.data() + static_cast<std::size_t>(i) * groups);
                    for (int q = 0; q < k; ++q) {
                        const double term = double(u[q] - za[i]) * sa[i] * w[q * n + j];
                        exact += term;
                        magnitude += std::fabs(term);
                    }
                    far += j >= c0 ? std::fabs(c[i * n + j] - exact) > 1e-6 * magnitude : c[i * n + j] != 7.0f;
                }
            CHECK(far == 0);
            if (first.empty()) first = c;
            CHECK(c == first);
        }
    }
}

TEST_CASE("int4 weights: torchao's affine rule per group of 128, bf16 parameters, within half a step") {
    // Range [-1, 2]: scale bf16(3 / 15) = 0.2001953125, zero bf16(-1 + 8 scale) = 0.6015625.
    const vitreg::quant::AffineU4 q = vitreg::quant::affine_u4(-1.0f, 2.0f);
    CHECK(q.scale == 0.2001953125f);
    CHECK(q.zero == 0.6015625f);
    CHECK(vitreg::quant::quantize_u4(-1.0f, q) == 0);
    CHECK(vitreg::quant::quantize_u4(2.0f, q) == 15);
    CHECK(vitreg::quant::quantize_u4(std::nanf(""), q) == 0);
    CHECK(vitreg::quant::dequantize_u4(8, q) == q.zero);
    CHECK(vitreg::quant::affine_u4(3.0f, 3.0f).scale == round_bf16(1e-6f));  // a constant group: the floor
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    constexpr int kK = 300, kN = 5;  // groups of 128, 128 and 44
    std::vector<float> b(kK * kN);
    for (auto& v : b) v = normal(rng);
    const PackedInt4 p = pack_int4(b.data(), kK, kN, kN);
    REQUIRE(p.blocks() == 3);
    const std::vector<float> w = dequantize(p);
    for (int r = 0; r < kK; ++r)
        for (int j = 0; j < kN; ++j) {
            const float scale = vitreg::quant::from_bf16(p.scale[(r / 128) * kN + j]);
            CHECK(std::fabs(w[r * kN + j] - b[r * kN + j]) <= 0.5f * scale * 1.02f);
        }
}

TEST_CASE("the vpmaddubsw kernel takes 7-bit weights only") {
    if (!supported(Int8Isa::Avx2Maddubs)) return;
    const std::vector<float> b(4 * 16, 1.0f);
    CHECK_THROWS_WITH(pack_int8(b.data(), 4, 16, 16, Int8Isa::Avx2Maddubs, 8), Catch::Contains("7-bit weights only"));
    CHECK(pack_int8(b.data(), 4, 16, 16, Int8Isa::Avx2Maddubs, 7).scale[0] == Approx(1.0f / 63));
}

TEST_CASE("int8 quantization follows ONNX Runtime's dynamic rule and dequantizes to within half a step") {
    // DynamicQuantizeLinear of [-1, 0.5, 2]: range [-1, 2], scale 3/255, zero point 85.
    const AffineU8 q = vitreg::quant::affine_u8(-1.0f, 2.0f);
    CHECK(q.scale == Approx(3.0 / 255));
    CHECK(q.zero_point == 85);
    CHECK(vitreg::quant::quantize_u8(-1.0f, q) == 0);
    CHECK(vitreg::quant::quantize_u8(2.0f, q) == 255);
    CHECK(vitreg::quant::quantize_u8(0.0f, q) == 85);  // zero is exact
    // The range always includes 0; an all-zero row maps everything to 0.
    CHECK(vitreg::quant::affine_u8(1.0f, 3.0f).zero_point == 0);
    CHECK(vitreg::quant::affine_u8(-4.0f, -1.0f).zero_point == 255);
    CHECK(vitreg::quant::quantize_u8(0.0f, vitreg::quant::affine_u8(0.0f, 0.0f)) == 0);
    CHECK(vitreg::quant::quantize_u8(std::nanf(""), q) == 0);
    // bf16 rounds to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7.
    CHECK(round_bf16(1.0f + 1.0f / 256) == 1.0f);
    CHECK(round_bf16(1.0f + 3.0f / 256) == 1.0f + 4.0f / 256);
    CHECK(std::isnan(round_bf16(std::nanf(""))));

    // Per-token quantization of random rows: every value within half a step of its row's scale.
    std::mt19937 rng(2);
    std::normal_distribution<float> normal(0.3f, 2.0f);
    constexpr int kRows = 5, kWidth = 37;
    std::vector<float> x(kRows * kWidth);
    for (auto& v : x) v = normal(rng);
    std::vector<std::uint32_t> out(kRows * ((kWidth + 3) / 4));
    std::vector<float> scale(kRows);
    std::vector<std::int32_t> zero(kRows);
    quantize_rows(x.data(), kWidth, kRows, kWidth, nullptr, out.data(), scale.data(), zero.data());
    for (int r = 0; r < kRows; ++r) {
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(out.data() + r * ((kWidth + 3) / 4));
        for (int i = 0; i < kWidth; ++i)
            CHECK(std::abs((bytes[i] - zero[r]) * scale[r] - x[r * kWidth + i]) <= 0.5f * scale[r] * 1.0001f);
        for (int i = kWidth; i < 4 * ((kWidth + 3) / 4); ++i) CHECK(bytes[i] == 0);
    }
}

TEST_CASE("32-bit blocks transpose exactly, whole 16 x 16 blocks and their edges") {
    std::mt19937 rng(5);
    for (const auto [rows, cols] : {std::pair{1, 1}, {16, 16}, {3, 17}, {17, 3}, {33, 48}, {48, 201}, {15, 1}, {1, 16}}) {
        INFO(rows << " x " << cols);
        const long lds = cols + 3, ldd = rows + 5;
        std::vector<std::uint32_t> src(static_cast<std::size_t>(rows) * lds), dst(static_cast<std::size_t>(cols) * ldd, 7u);
        for (auto& v : src) v = rng();
        transpose32(src.data(), lds, rows, cols, dst.data(), ldd);
        long mismatches = 0;
        for (int c = 0; c < cols; ++c)
            for (long r = 0; r < ldd; ++r)
                mismatches += dst[c * ldd + r] != (r < rows ? src[r * lds + c] : 7u);  // (past rows: untouched)
        CHECK(mismatches == 0);
    }
}
