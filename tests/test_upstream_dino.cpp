// DINO's own VisionTransformer and DINOv2's and DINOv3's own DinoVisionTransformer
// (tests/upstream/dino_fixtures.py, dinov2_fixtures.py and dinov3_fixtures.py): small random models
// as their hub builders configure them, saved as the torch hub's .pth, with the final-normed class
// token, registers (DINOv3's storage tokens) and patches in float64 at the native size and a
// non-square one, at the commit each cases.json records.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "upstream_case.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/model.hpp"

using namespace vitreg;
using namespace vitreg::test;
using json = nlohmann::json;

namespace {


void check_case(const Model& m, const json& c) {
    const std::string size = c["size"].get<std::string>();
    const SafetensorsFile f(fixture(c["expected"].get<std::string>()));
    const Features out = run_upstream_case(m, c, size);
    const int registers = c["registers"].get<int>();
    CHECK(out.registers == registers);
    const double cls = relative_error(out.cls, tensor(f, size + ".cls"));
    const double regs = registers ? relative_error(out.reg_tokens, tensor(f, size + ".registers")) : 0.0;
    const double patches = relative_error(out.patches, tensor(f, size + ".patches"));
    INFO("cls " << cls << ", registers " << regs << ", patches " << patches);
    CHECK(cls < kParityTolerance);
    CHECK(regs < kParityTolerance);
    CHECK(patches < kParityTolerance);
}

void check_dino_cases(const std::string& upstream, std::size_t at_least) {
    const auto index = fixture_json("upstream/" + upstream + "/cases.json");
    REQUIRE(index["cases"].size() >= at_least);
    for (const auto& c : index["cases"]) {
        INFO(upstream << " " << index["commit"].get<std::string>() << " case " << c["name"].get<std::string>());
        check_case(Model::load(fixture(c["model"].get<std::string>())), c);
    }
}

}  // namespace

TEST_CASE("DINOv2's own DinoVisionTransformer: hub .pth, ViT-S +- registers and ViT-g's SwiGLU, native and non-square") {
    check_dino_cases("dinov2", 6);
}

TEST_CASE("DINOv3's own DinoVisionTransformer: hub .pth, ViT-S, S+'s SwiGLU and 7B's shape, any grid") {
    check_dino_cases("dinov3", 6);
}

TEST_CASE("DINO's own VisionTransformer: hub .pth, ViT-S/16 and ViT-S/8, native and non-square") {
    check_dino_cases("dino", 4);
}

TEST_CASE("DINO's own VisionTransformer through its torch hub name: dino_vits16's release file") {
    TorchHome home;
    write_bytes(home.checkpoints() + "/dino_deitsmall16_pretrain.pth", read_bytes(fixture("upstream/dino/dino_vits16.pth")));
    const Model m = Model::load(resolve_model_path("dino_vits16"));
    const auto index = fixture_json("upstream/dino/cases.json");
    int checked = 0;
    for (const auto& c : index["cases"]) {
        if (c["model"] != "upstream/dino/dino_vits16.pth") continue;
        INFO("case " << c["name"].get<std::string>());
        check_case(m, c);
        ++checked;
    }
    CHECK(checked == 2);
}
