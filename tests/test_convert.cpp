// vitreg convert: every family, layout and file format vitreg reads, written in vitreg's own
// layout, loads back to the same configuration and gives the same features (bit for bit at
// f32; within the rounding of f16 / bf16), with its provenance in the metadata.
#include <catch2/catch.hpp>
#include <cmath>

#include "test_support.hpp"
#include "vitreg/canonical_checkpoint.hpp"
#include "vitreg/model.hpp"
#include "core/safetensors.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

// The largest |a - b| over every output, relative to the largest |b|.
double difference(const Features& a, const Features& b) {
    REQUIRE(a.cls.size() == b.cls.size());
    REQUIRE(a.patches.size() == b.patches.size());
    REQUIRE(a.reg_tokens.size() == b.reg_tokens.size());
    REQUIRE(a.embedding.size() == b.embedding.size());
    double worst = 0, scale = 1e-30;
    for (const auto* pair : {&a.cls, &a.patches, &a.reg_tokens, &a.embedding}) {
        const auto& got = *pair;
        const auto& want = pair == &a.cls ? b.cls : pair == &a.patches ? b.patches : pair == &a.reg_tokens ? b.reg_tokens : b.embedding;
        for (std::size_t i = 0; i < got.size(); ++i) {
            worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
            scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
        }
    }
    return worst / scale;
}

}  // namespace

TEST_CASE("convert: every family and format loads back to the same features", "[convert]") {
    const std::string model = GENERATE(as<std::string>{}, "models/dinov2_f32.safetensors", "models/dinov2_reg2_f16.safetensors",
                                       "models/hf_dinov2", "models/hf_reg2", "models/hf_swiglu", "models/timm_reg2_bf16.safetensors",
                                       "models/sink_reg2_f32.safetensors", "models/softmax1_f32.safetensors", "models/hf_clip",
                                       "models/open_clip_quickgelu", "models/open_clip_gelu_f16", "models/timm_deit3",
                                       "models/timm_avg_fcnorm", "models/timm_clip_f16.safetensors",
                                       "models/timm_noqkvbias.safetensors", "torch/teacher_module.pth", "models/hf_siglip",
                                       "models/hf_siglip_full", "models/hf_dinov3", "models/hf_dinov3_gated",
                                       "torch/dinov3_hub.pth", "torch/dinov3_hub_gated.pth", "models/timm_eva02_small",
                                       "models/timm_eva02_base", "models/timm_eva02_clip", "models/timm_siglip");
    INFO(model);
    TempDir dir;
    const std::string out = dir / "converted.safetensors";
    const Config written = convert_checkpoint(fixture(model), {}, DType::F32, out);
    const Model source = Model::load(fixture(model)), converted = Model::load(out);
    const Config &a = source.config(), &b = converted.config();
    CHECK(written.family == a.family);
    CHECK(b.family == a.family);
    CHECK(b.mlp == a.mlp);
    CHECK(b.attention == a.attention);
    CHECK(b.pos_interp == a.pos_interp);
    CHECK(b.class_token == a.class_token);
    CHECK(b.pre_norm == a.pre_norm);
    CHECK(b.pool == a.pool);
    CHECK(b.fc_norm == a.fc_norm);
    CHECK(b.proj_dim == a.proj_dim);
    CHECK(b.eps == a.eps);
    CHECK(b.mean == a.mean);
    CHECK(b.std == a.std);
    CHECK(b.input_size == a.input_size);
    CHECK(b.crop_pct == a.crop_pct);
    CHECK(b.positions == a.positions);
    CHECK(b.rope_theta == a.rope_theta);
    CHECK(b.rope_ref_grid == a.rope_ref_grid);
    CHECK(b.attn_norm == a.attn_norm);
    CHECK(b.mlp_norm == a.mlp_norm);
    CHECK(b.pipeline == a.pipeline);
    CHECK(b.eval_squash == a.eval_squash);
    CHECK(b.interpolation == a.interpolation);
    const int p = a.patch, native = a.grid * p;
    for (const auto& [h, w] : {std::pair<int, int>{native, native}, {2 * p, 3 * p}}) {
        const auto x = smooth_pixels(h, w);
        CHECK(difference(converted.forward(x.data(), 1, h, w), source.forward(x.data(), 1, h, w)) == 0.0);
    }
    const SafetensorsFile file(out);
    const std::string weights = Checkpoint(fixture(model)).path();
    CHECK(file.metadata().at("source") == weights.substr(weights.find_last_of('/') + 1));
    CHECK(file.metadata().at("source_digest").rfind("fnv1a64:", 0) == 0);
    CHECK(file.metadata().at("converted_by").rfind("vitreg convert", 0) == 0);
}

TEST_CASE("convert: f16 and bf16 storage round the weights and nothing else", "[convert]") {
    TempDir dir;
    const Model source = Model::load(fixture("models/hf_clip"));
    const int n = source.config().grid * source.config().patch;
    const auto x = smooth_pixels(n, n);
    const Features want = source.forward(x.data(), 1, n, n);
    for (const auto& [dtype, tolerance] : {std::pair<DType, double>{DType::F16, 5e-3}, {DType::BF16, 4e-2}}) {
        const std::string out = dir / ("converted-" + to_string(dtype) + ".safetensors");
        convert_checkpoint(fixture("models/hf_clip"), {}, dtype, out);
        CHECK(SafetensorsFile(out).dominant_dtype() == dtype);
        const double d = difference(Model::load(out).forward(x.data(), 1, n, n), want);
        INFO(to_string(dtype) << " " << d);
        CHECK(d > 0);
        CHECK(d < tolerance);
    }
}
