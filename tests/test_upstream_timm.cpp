// timm's own VisionTransformer and Eva (tests/upstream/timm_fixtures.py): small random models that
// timm.create_model builds for architectures of vitreg's table (only width, depth, heads and image
// size overridden), saved as timm hub folders (model.safetensors + config.json), with
// forward_features' class token, registers and patches and forward_head(pre_logits=True)'s pooled
// feature in float64, at the native 3x3 grid and a non-square 2x4 one (timm's dynamic_img_size:
// resample_abs_pos_embed, EVA's RoPE grid), at the commit cases.json records.
#include <catch2/catch.hpp>

#include "test_support.hpp"
#include "vitreg/model.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

constexpr double kTolerance = 1e-4;  // relative to the output's scale, as tests/test_upstream.cpp

}  // namespace

TEST_CASE("timm's own VisionTransformer and Eva: hub folders, class token, registers, patches and pooled, any grid") {
    const auto index = fixture_json("upstream/timm/cases.json");
    REQUIRE(index["cases"].size() >= 12);
    for (const auto& c : index["cases"]) {
        INFO("timm " << index["commit"].get<std::string>() << " case " << c["name"].get<std::string>());
        const Model m = Model::load(fixture(c["model"].get<std::string>()));
        const std::string size = c["size"].get<std::string>(), key = c["input"].get<std::string>();
        const SafetensorsFile inputs(fixture(c["inputs"].get<std::string>()));
        const SafetensorsFile f(fixture(c["expected"].get<std::string>()));
        const auto input = tensor(inputs, key);
        const int batch = static_cast<int>(inputs.get(key).shape[0]);
        const Features out = m.forward(input.data(), batch, c["height"].get<int>(), c["width"].get<int>(), ForwardOptions{2});
        const int registers = c["registers"].get<int>();
        const bool class_token = c["class_token"].get<bool>();
        CHECK(out.registers == registers);
        const auto pooled_expected = tensor(f, size + ".pooled");
        // timm's pooled feature: the class token (global_pool 'token'), else fc_norm(mean) or the MAP head.
        std::vector<float> pooled;
        if (c["global_pool"].get<std::string>() == "token") {
            pooled = out.cls;
        } else {
            CHECK(!out.pooled.empty());
            for (int b = 0; b < out.batch; ++b) {
                const auto p = out.pooled_of(b);
                pooled.insert(pooled.end(), p.begin(), p.end());
            }
        }
        // Without a class token vitreg's `cls` holds the pooled feature.
        const double cls = relative_error(out.cls, class_token ? tensor(f, size + ".cls") : pooled_expected);
        const double regs = registers ? relative_error(out.reg_tokens, tensor(f, size + ".registers")) : 0.0;
        const double patches = relative_error(out.patches, tensor(f, size + ".patches"));
        const double pool = relative_error(pooled, pooled_expected);
        INFO("cls " << cls << ", registers " << regs << ", patches " << patches << ", pooled " << pool);
        CHECK(cls < kTolerance);
        CHECK(regs < kTolerance);
        CHECK(patches < kTolerance);
        CHECK(pool < kTolerance);
    }
}
