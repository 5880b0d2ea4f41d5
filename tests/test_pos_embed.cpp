// Position-embedding resampling against PyTorch's interpolate for each origin's mode.
#include <catch2/catch.hpp>

#include "test_support.hpp"
#include "vitreg/pos_embed.hpp"

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
