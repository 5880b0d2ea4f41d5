// The non-GEMM loops of every kernel set this CPU runs (vector_loops.hpp), against double
// precision or the scalar definitions in quantize.hpp; the integer outputs (bf16 bits, uint8
// codes, ranges) must agree bit for bit across sets.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include "cpu.hpp"
#include "half_rows.hpp"
#include "safetensors.hpp"
#include "vector_loops.hpp"

using namespace vitreg;

namespace {

std::vector<cpu::Level> levels() {
    std::vector<cpu::Level> out{cpu::Level::Portable};
    if (cpu::usable().avx2_fma) out.push_back(cpu::Level::Avx2);
    if (cpu::usable().avx512) out.push_back(cpu::Level::Avx512);
    return out;
}

std::vector<float> normal_values(int n, float scale, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::vector<float> v(n);
    for (auto& x : v) x = scale * normal(rng);
    return v;
}

}  // namespace

TEST_CASE("vector loops: every kernel set against double precision") {
    for (const cpu::Level level : levels()) {
        INFO("level " << cpu::to_string(level));
        const loops::Table& t = loops::table(level);
        for (const int n : {1, 7, 16, 33, 261, 384}) {
            INFO("n " << n);
            const std::vector<float> x = normal_values(n, 3.0f, 1 + n);
            {  // softmax-1 over the row: e^z_i / (1 + Σ e^z)
                std::vector<float> z = x;
                const float null_mass = t.normalize_attention(z.data(), n, AttentionKind::Softmax1, 0.0f);
                double m = 0, denom = 0;
                for (float v : x) m = std::max(m, double(v));
                for (float v : x) denom += std::exp(v - m);
                denom += std::exp(-m);
                for (int i = 0; i < n; ++i) CHECK(z[i] == Approx(std::exp(x[i] - m) / denom).epsilon(3e-6).margin(1e-12));
                CHECK(null_mass == Approx(std::exp(-m) / denom).epsilon(3e-6).margin(1e-12));
            }
            {  // LayerNorm
                const std::vector<float> w = normal_values(n, 1.0f, 2), b = normal_values(n, 1.0f, 3);
                std::vector<float> out(n);
                t.layer_norm_row(x.data(), n, w.data(), b.data(), 1e-6f, out.data());
                double mean = 0, var = 0;
                for (float v : x) mean += v;
                mean /= n;
                for (float v : x) var += (v - mean) * (v - mean);
                var /= n;
                for (int i = 0; i < n; ++i)
                    CHECK(out[i] == Approx((x[i] - mean) / std::sqrt(var + 1e-6) * w[i] + b[i]).margin(2e-5));
            }
            {  // GELU (erf), QuickGELU, GELU (tanh), SiLU gating
                std::vector<float> g = x, q = x, th = x, s(n);
                const std::vector<float> gate = normal_values(n, 1.0f, 4);
                t.gelu(g.data(), 1, n, n);
                t.quick_gelu(q.data(), 1, n, n);
                t.gelu_tanh(th.data(), 1, n, n);
                t.silu_mul(x.data(), gate.data(), n, s.data());
                for (int i = 0; i < n; ++i) {
                    const double v = x[i];
                    CHECK(g[i] == Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))).margin(2e-6));
                    CHECK(q[i] == Approx(v / (1 + std::exp(-1.702 * v))).margin(2e-6));
                    CHECK(th[i] == Approx(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))))
                                       .margin(2e-6));
                    CHECK(s[i] == Approx(v / (1 + std::exp(-v)) * gate[i]).margin(2e-6));
                }
            }
            {  // axpy
                std::vector<float> d = normal_values(n, 1.0f, 5);
                const std::vector<float> before = d;
                t.axpy(0.25f, x.data(), d.data(), n);
                for (int i = 0; i < n; ++i) CHECK(d[i] == Approx(before[i] + 0.25 * x[i]).margin(1e-6));
            }
        }
    }
}

TEST_CASE("vector loops: bf16 rounding, ranges and uint8 codes are the same bits in every kernel set") {
    std::vector<float> x = normal_values(389, 50.0f, 9);
    x[3] = NAN;
    x[10] = INFINITY;
    x[11] = -0.0f;
    const int k = static_cast<int>(x.size());
    for (const cpu::Level level : levels()) {
        INFO("level " << cpu::to_string(level));
        const loops::Table& t = loops::table(level);
        std::vector<float> rounded(k);
        t.round_bf16(x.data(), k, rounded.data());
        std::vector<std::uint32_t> pairs((k + 1) / 2);
        t.bf16_pairs(x.data(), k, pairs.data());
        for (int i = 0; i < k; ++i) {
            const std::uint16_t want = quant::to_bf16(x[i]);
            std::uint32_t got_bits;
            std::memcpy(&got_bits, &rounded[i], sizeof got_bits);
            CHECK(got_bits >> 16 == want);
            CHECK(((pairs[i / 2] >> (16 * (i % 2))) & 0xffffu) == want);
        }
        CHECK(pairs.back() >> 16 == 0u);  // odd k: the missing partner is zero
        std::vector<float> finite(x.begin() + 12, x.end());
        float lo = 1, hi = -1;
        t.range(finite.data(), static_cast<int>(finite.size()), &lo, &hi);
        CHECK(lo == *std::min_element(finite.begin(), finite.end()));
        CHECK(hi == *std::max_element(finite.begin(), finite.end()));
        // The values' own range, and a narrow one that most of them overflow on both sides.
        for (const quant::AffineU8 q : {quant::affine_u8(lo, hi), quant::affine_u8(-1.0f, 0.5f)}) {
            std::vector<std::uint8_t> codes(k);
            t.quantize_u8(x.data(), k, q, codes.data());
            for (int i = 0; i < k; ++i) CHECK(codes[i] == quant::quantize_u8(x[i], q));
        }
    }
}

TEST_CASE("vector loops: int8 weight rows are quantize_s8's codes and scale in every kernel set") {
    // Whole blocks and tails; a NaN, which the scale leaves out and which quantizes to 0; −0; an
    // infinity, which makes the scale 1; a row of zeros; 8- and 7-bit widths.
    for (const int n : {1, 15, 16, 37, 389}) {
        for (const int variant : {0, 1, 2, 3}) {
            std::vector<float> w = normal_values(n, 0.03f, 20 + n);
            if (variant == 1) w[n / 2] = NAN, w[0] = -0.0f;
            if (variant == 2) w[n - 1] = -INFINITY;
            if (variant == 3) std::fill(w.begin(), w.end(), 0.0f);
            for (const float qmax : {127.0f, 63.0f}) {
                float max_abs = 0.0f;
                for (const float v : w) max_abs = std::max(max_abs, std::fabs(v));
                const float want_scale = quant::symmetric_scale(max_abs, qmax);
                for (const cpu::Level level : levels()) {
                    INFO("level " << cpu::to_string(level) << " n " << n << " variant " << variant << " qmax " << qmax);
                    std::vector<std::int8_t> q(n, 99);
                    const float scale = loops::table(level).quantize_s8_row(w.data(), n, qmax, q.data());
                    CHECK(scale == want_scale);
                    long mismatches = 0;
                    for (int i = 0; i < n; ++i) mismatches += q[i] != quant::quantize_s8(w[i], want_scale, qmax);
                    CHECK(mismatches == 0);
                }
            }
        }
    }
}

TEST_CASE("vector loops: int4 weight rows are quantize_u4's codes, scales and zeros in every kernel set") {
    // Whole groups, short last ones and an odd width; a NaN first in a group (it is the group's
    // range) and one later (left out); an infinity; a row of zeros.
    for (const int len : {1, 7, 128, 130, 301, 389}) {
        for (const int variant : {0, 1, 2, 3}) {
            std::vector<float> w = normal_values(len, 0.05f, 40 + len);
            if (variant == 1) w[len / 2] = NAN, w[(len - 1) / 128 * 128] = NAN;
            if (variant == 2) w[len - 1] = INFINITY;
            if (variant == 3) std::fill(w.begin(), w.end(), 0.0f);
            const int groups = quant::int4_groups(len), bytes = quant::int4_row_bytes(len);
            std::vector<std::uint16_t> want_scale(groups), want_zero(groups);
            std::vector<std::uint8_t> want(bytes, 0);
            for (int g = 0; g < groups; ++g) {
                const int i0 = g * quant::kInt4Group, i1 = std::min(len, i0 + quant::kInt4Group);
                float lo = w[i0], hi = lo;
                for (int i = i0; i < i1; ++i) lo = w[i] < lo ? w[i] : lo, hi = w[i] > hi ? w[i] : hi;
                const quant::AffineU4 a = quant::affine_u4(lo, hi);
                want_scale[g] = quant::to_bf16(a.scale), want_zero[g] = quant::to_bf16(a.zero);
                for (int i = i0; i < i1; ++i) want[i / 2] |= static_cast<std::uint8_t>(quant::quantize_u4(w[i], a) << (4 * (i % 2)));
            }
            for (const cpu::Level level : levels()) {
                INFO("level " << cpu::to_string(level) << " len " << len << " variant " << variant);
                std::vector<std::uint16_t> scale(groups), zero(groups);
                std::vector<std::uint8_t> codes(bytes, 0);
                loops::table(level).quantize_u4_row(w.data(), len, scale.data(), zero.data(), codes.data());
                CHECK(scale == want_scale);
                CHECK(zero == want_zero);
                CHECK(codes == want);
            }
        }
    }
}

TEST_CASE("weighted rows: every kernel set against double precision, blocks and tails") {
    for (const cpu::Level level : levels()) {
        INFO("level " << cpu::to_string(level));
        const loops::Table& t = loops::table(level);
        for (const int n : {1, 6, 63, 64, 65, 192, 389}) {
            INFO("n " << n);
            for (const int taps : {1, 2, 25}) {
                std::vector<std::vector<float>> rows;
                std::vector<const float*> pointers;
                for (int r = 0; r < taps; ++r) rows.push_back(normal_values(n, 2.0f, 10 + 7 * r + n));
                for (const auto& r : rows) pointers.push_back(r.data());
                const std::vector<float> w = normal_values(taps, 1.0f, 99 + taps);
                const float scale = 0.37f;
                std::vector<float> out(n);
                t.weighted_rows(pointers.data(), w.data(), taps, n, scale, out.data());
                int bad = 0;
                for (int i = 0; i < n; ++i) {
                    double want = 0, size = 0;
                    for (int r = 0; r < taps; ++r) {
                        want += double(w[r]) * rows[r][i];
                        size += std::abs(double(w[r]) * rows[r][i]);
                    }
                    if (std::abs(out[i] - want * scale) > 1e-6 * size * scale) ++bad;
                }
                CHECK(bad == 0);
            }
        }
    }
}

TEST_CASE("float rows narrowed to half: every level gives float_to_half's bits") {
    std::vector<float> x = normal_values(1000, 3.0f, 5);
    for (const float v : {0.0f, -0.0f, 65504.0f, 65520.0f, -65536.0f, 1e-8f, -6e-8f, 3e-5f, 6.1035156e-05f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min()})
        x.push_back(v);
    for (std::uint32_t h = 0; h < 0x7c00; h += 7) {  // halves and the ties between neighbours
        x.push_back(half_to_float(static_cast<std::uint16_t>(h)));
        x.push_back(0.5f * (half_to_float(static_cast<std::uint16_t>(h)) + half_to_float(static_cast<std::uint16_t>(h + 1))));
    }
    x.push_back(std::numeric_limits<float>::quiet_NaN());
    for (const cpu::Level level : levels()) {
        INFO("level " << cpu::to_string(level));
        for (const std::size_t n : {x.size(), std::size_t(13)}) {  // full vectors and a tail
            std::vector<std::uint16_t> out(n);
            floats_to_half(level, x.data(), n, out.data());
            int bad = 0;
            for (std::size_t i = 0; i < n; ++i) {
                if (std::isnan(x[i])) {
                    if ((out[i] & 0x7c00u) != 0x7c00u || !(out[i] & 0x3ffu)) ++bad;  // NaN stays NaN, payload aside
                } else if (out[i] != float_to_half(x[i])) {
                    ++bad;
                }
            }
            CHECK(bad == 0);
        }
    }
}

TEST_CASE("VITREG_ISA sets the kernel set the process runs, and says so") {
    // Run again with VITREG_ISA=avx2 and =portable by the catch2_as_* tests: there the override
    // must win over the hardware, and the report must name both.
    const cpu::Level hw = cpu::detected().avx512 ? cpu::Level::Avx512
                          : cpu::detected().avx2_fma ? cpu::Level::Avx2 : cpu::Level::Portable;
    const char* forced = std::getenv("VITREG_ISA");
    if (forced && *forced) {
        CHECK(std::string(cpu::to_string(cpu::level())) == forced);
        if (cpu::level() != hw)
            CHECK(cpu::describe_level() == std::string(forced) + " (VITREG_ISA; the CPU has " + cpu::to_string(hw) + ")");
        if (cpu::level() == cpu::Level::Avx2) CHECK_FALSE(cpu::usable().avx_vnni);  // a plain AVX2 + FMA CPU
    } else {
        CHECK(cpu::level() == hw);
        CHECK(cpu::describe_level() == cpu::to_string(hw));
    }
}
