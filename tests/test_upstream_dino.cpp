// DINOv2's and DINOv3's own DinoVisionTransformer (tests/upstream/dinov2_fixtures.py and
// dinov3_fixtures.py): small random models as their hub builders configure them, saved as the torch
// hub's .pth, with forward_features' class token, registers (DINOv3's storage tokens) and patches in
// float64 at the native size and a non-square one, at the commit each cases.json records.
#include <catch2/catch.hpp>

#include "test_support.hpp"
#include "vitreg/model.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

constexpr double kTolerance = 1e-4;  // relative to the output's scale, as tests/test_upstream.cpp

void check_dino_cases(const std::string& upstream, std::size_t at_least) {
    const auto index = fixture_json("upstream/" + upstream + "/cases.json");
    REQUIRE(index["cases"].size() >= at_least);
    for (const auto& c : index["cases"]) {
        INFO(upstream << " " << index["commit"].get<std::string>() << " case " << c["name"].get<std::string>());
        const Model m = Model::load(fixture(c["model"].get<std::string>()));
        const std::string size = c["size"].get<std::string>();
        const SafetensorsFile inputs(fixture(c["inputs"].get<std::string>()));
        const SafetensorsFile f(fixture(c["expected"].get<std::string>()));
        const auto input = tensor(inputs, size);
        const int batch = static_cast<int>(inputs.get(size).shape[0]);
        const Features out = m.forward(input.data(), batch, c["height"].get<int>(), c["width"].get<int>(), ForwardOptions{2});
        const int registers = c["registers"].get<int>();
        CHECK(out.registers == registers);
        const double cls = relative_error(out.cls, tensor(f, size + ".cls"));
        const double regs = registers ? relative_error(out.reg_tokens, tensor(f, size + ".registers")) : 0.0;
        const double patches = relative_error(out.patches, tensor(f, size + ".patches"));
        INFO("cls " << cls << ", registers " << regs << ", patches " << patches);
        CHECK(cls < kTolerance);
        CHECK(regs < kTolerance);
        CHECK(patches < kTolerance);
    }
}

}  // namespace

TEST_CASE("DINOv2's own DinoVisionTransformer: hub .pth, ViT-S +- registers and ViT-g's SwiGLU, native and non-square") {
    check_dino_cases("dinov2", 6);
}

TEST_CASE("DINOv3's own DinoVisionTransformer: hub .pth, ViT-S, S+'s SwiGLU and 7B's shape, any grid") {
    check_dino_cases("dinov3", 6);
}
