// Position-embedding resampling against PyTorch's interpolate for each origin's mode, and the
// rotary tables of DINOv3 against their definition (docs/design.md, "Families") worked by hand.
#include <catch2/catch.hpp>

#include <cmath>

#include "rope.hpp"
#include "test_support.hpp"
#include "core/pos_embed.hpp"

using namespace vitreg;
using namespace vitreg::test;

TEST_CASE("pos-embed resampling equals torch interpolate in every mode") {
    const SafetensorsFile f(fixture("posembed.safetensors"));
    const auto src = tensor(f, "src");
    const int M = 7, D = 8;
    for (const auto mode : {PosInterp::Offset, PosInterp::Antialias, PosInterp::Size}) {
        for (const auto [h, w] : {std::pair{3, 5}, {7, 7}, {10, 4}, {14, 14}, {5, 9}}) {
            const std::string name = to_string(mode) + "_" + std::to_string(h) + "x" + std::to_string(w);
            INFO(name);
            const auto got = resample_pos_embed(src, M, D, h, w, mode);
            CHECK(relative_error(got, tensor(f, name)) < 1e-5);
        }
    }
}

TEST_CASE("offset mode differs from size mode (the +0.1 matters)") {
    const SafetensorsFile f(fixture("posembed.safetensors"));
    const auto src = tensor(f, "src");
    const auto offset = resample_pos_embed(src, 7, 8, 10, 4, PosInterp::Offset);
    CHECK(relative_error(offset, tensor(f, "size_10x4")) > 1e-3);
}

TEST_CASE("DINOv3's axial rotary tables: each axis over its own count, [y bands, x bands]") {
    const int gh = 2, gw = 3, hd = 8;  // 2 bands per axis
    const RopeTables t = rope_axial_tables(gh, gw, hd, 100.0f);
    REQUIRE(t.patches == 6);
    REQUIRE(t.half == 4);
    const double pi = 3.14159265358979323846;
    for (int r = 0; r < gh; ++r)
        for (int c = 0; c < gw; ++c) {
            const double y = (r + 0.5) / gh * 2 - 1, x = (c + 0.5) / gw * 2 - 1;
            const double angles[4] = {2 * pi * y, 2 * pi * y / 10, 2 * pi * x, 2 * pi * x / 10};  // 100^(-4j/8): 1, 1/10
            for (int j = 0; j < 4; ++j) {
                INFO("patch " << r << "," << c << " angle " << j);
                CHECK(t.cos[(r * gw + c) * 4 + j] == Approx(std::cos(angles[j])).margin(1e-6));
                CHECK(t.sin[(r * gw + c) * 4 + j] == Approx(std::sin(angles[j])).margin(1e-6));
            }
        }
}

TEST_CASE("rotary positions turn the patches' q and k by their angles and leave the prefix and v alone") {
    const int gh = 2, gw = 2, heads = 2, hd = 8, dim = heads * hd, prefix = 3, tokens = prefix + gh * gw;
    const RopeTables t = rope_axial_tables(gh, gw, hd, 100.0f);
    std::vector<float> qkv(static_cast<std::size_t>(2) * tokens * 3 * dim);
    for (std::size_t i = 0; i < qkv.size(); ++i) qkv[i] = std::sin(0.37f * static_cast<float>(i) + 1.0f);
    const std::vector<float> before = qkv;
    apply_rope(qkv.data(), 2, tokens, prefix, heads, hd, t);
    for (int b = 0; b < 2; ++b)
        for (int tok = 0; tok < tokens; ++tok)
            for (int part = 0; part < 3; ++part)
                for (int h = 0; h < heads; ++h)
                    for (int j = 0; j < hd / 2; ++j) {
                        const std::size_t at = ((static_cast<std::size_t>(b) * tokens + tok) * 3 + part) * dim + h * hd + j;
                        const float a = before[at], c = before[at + hd / 2];
                        if (tok < prefix || part == 2) {  // prefix tokens and v: untouched
                            CHECK(qkv[at] == a);
                            CHECK(qkv[at + hd / 2] == c);
                            continue;
                        }
                        const std::size_t row = static_cast<std::size_t>(tok - prefix) * (hd / 2) + j;
                        CHECK(qkv[at] == Approx(a * t.cos[row] - c * t.sin[row]).margin(1e-6));
                        CHECK(qkv[at + hd / 2] == Approx(c * t.cos[row] + a * t.sin[row]).margin(1e-6));
                    }
}
