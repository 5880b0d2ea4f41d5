// timm's own VisionTransformer and Eva (tests/upstream/timm_fixtures.py): small random models that
// timm.create_model builds for architectures of vitreg's table (only width, depth, heads and image
// size overridden), saved as timm hub folders (model.safetensors + config.json), with
// forward_features' class token, registers and patches and forward_head(pre_logits=True)'s pooled
// feature in float64, at the native 3x3 grid and a non-square 2x4 one (timm's dynamic_img_size:
// resample_abs_pos_embed, EVA's RoPE grid), at the commit cases.json records.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <set>

#include "core/checkpoint/timm_architectures.hpp"
#include "test_support.hpp"
#include "upstream_case.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {


// A class's parameters by what vitreg does with them ("read", "inert", "runs").
std::map<std::string, std::set<std::string>> uses_of(const std::string& model_class) {
    std::map<std::string, std::set<std::string>> out;
    for (const auto& k : source::timm_parameter_uses(model_class)) {
        const char* use = k.use == source::KeyUse::Read ? "read" : k.use == source::KeyUse::Inert ? "inert" : "runs";
        CHECK(out[use].insert(k.key).second);  // each key classified once
    }
    return out;
}

// The arguments that only set a size (the fixtures override them): the rest is the recipe, what
// changes the maths. (mlp_ratio sets fc1's width; SwiGLU's split and alignment are their own keys.)
const std::set<std::string> kSizeOnly = {"embed_dim", "depth", "num_heads", "patch_size", "mlp_ratio", "img_size"};

nlohmann::json recipe(const source::TimmArchitecture& a) {
    nlohmann::json r = a.args;
    for (const auto& key : kSizeOnly) r.erase(key);
    return {{"class", a.model_class}, {"args", r}};
}

}  // namespace

TEST_CASE("timm parity covers every architecture vitreg runs: its recipe has a fixture case", "[timm]") {
    const auto index = fixture_json("upstream/timm/cases.json");
    std::set<std::string> covered;
    for (const auto& c : index["cases"]) {
        const auto config = fixture_json(c["model"].get<std::string>() + "/config.json");
        for (const auto& [key, value] : config["model_args"].items()) {
            INFO(c["name"].get<std::string>() << " overrides " << key);
            CHECK(kSizeOnly.count(key) == 1);  // else the case would not be its architecture's recipe
        }
        covered.insert(recipe(source::timm_architecture({{"architecture", c["architecture"]}}, "config.json")).dump());
    }
    int runs = 0;
    for (const auto& name : source::timm_architecture_names()) {
        std::optional<source::TimmArchitecture> a;
        try {
            a = source::timm_architecture({{"architecture", name}}, "config.json");
        } catch (const ConfigError&) {
            continue;  // refused by name (timm's table test)
        }
        ++runs;
        INFO(name << ": no fixture case shares its recipe " << recipe(*a).dump()
                  << "; add it to tests/upstream/timm_fixtures.py's RECIPES and regenerate");
        CHECK(covered.count(recipe(*a).dump()) == 1);
    }
    CHECK(runs > 100);
}

TEST_CASE("timm's VisionTransformer and Eva parameters: each read, inert or run only at some values", "[timm]") {
    using Set = std::set<std::string>;
    const Set training = {"drop_rate",      "pos_drop_rate",  "patch_drop_rate", "proj_drop_rate",
                          "attn_drop_rate", "drop_path_rate", "device",          "dtype"};
    const auto with = [](Set a, const Set& b) {
        a.insert(b.begin(), b.end());
        return a;
    };
    const std::map<std::string, std::map<std::string, Set>> expected = {
        {"VisionTransformer",
         {{"read",
           {"img_size", "patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio", "qkv_bias", "init_values",
            "scale_attn_norm", "scale_mlp_norm", "class_token", "reg_tokens", "no_embed_class", "pre_norm", "fc_norm"}},
          {"inert", with(training, {"dynamic_img_size", "num_classes", "weight_init", "fix_init"})},
          {"runs",
           {"act_layer", "mlp_layer", "norm_layer", "embed_norm_layer", "embed_layer", "block_fn", "attn_layer", "qk_norm",
            "proj_bias", "pos_embed", "pool_include_prefix", "dynamic_img_pad", "global_pool", "in_chans", "final_norm"}}}},
        {"Eva",
         {{"read",
           {"img_size", "patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio", "swiglu_mlp", "swiglu_align_to",
            "qkv_bias", "qkv_fused", "scale_mlp", "scale_attn_inner", "init_values", "class_token", "num_reg_tokens",
            "no_embed_class", "use_rot_pos_emb", "ref_feat_shape", "use_pre_transformer_norm",
            "use_post_transformer_norm", "use_fc_norm"}},
          {"inert", with(training, {"dynamic_img_size", "num_classes", "head_init_scale"})},
          {"runs",
           {"attn_type", "use_post_norm", "rope_type", "rope_grid_offset", "rope_grid_indexing", "rope_temperature",
            "rope_rotate_half", "use_abs_pos_emb", "attn_pool_num_heads", "attn_pool_mlp_ratio", "norm_layer",
            "dynamic_img_pad", "global_pool", "in_chans"}}}},
    };
    for (const auto& [cls, lists] : expected) {
        INFO("timm's " << cls);
        const auto uses = uses_of(cls);
        for (const auto& [use, keys] : lists) CHECK(uses.at(use) == keys);
        // The generated signature (timm_architectures.inc): a parameter added upstream fails here.
        const auto generated = source::timm_parameters(cls);
        CHECK(generated.size() > 40);
        Set classified;
        for (const auto& [use, keys] : uses) classified.insert(keys.begin(), keys.end());
        CHECK(classified == Set(generated.begin(), generated.end()));
    }
}

TEST_CASE("timm model_args: a key the model class does not take is refused by file, key and value", "[timm]") {
    const auto load = [](const nlohmann::json& model_args, const std::string& name = "vit_small_patch16_224") {
        return source::timm_architecture({{"architecture", name}, {"model_args", model_args}}, "dir/config.json");
    };
    CHECK_THROWS_WITH(load({{"foo", 1}}), "dir/config.json: model_args.foo = 1: 'foo' is not a key timm's "
                                          "VisionTransformer.__init__ has; vitreg refuses a setting it cannot read");
    CHECK_THROWS_WITH(load({{"use_rot_pos_emb", true}}), Catch::Contains("model_args.use_rot_pos_emb = true"));
    CHECK_THROWS_WITH(load({{"reg_tokens", 4}}, "eva02_small_patch14_224"),
                      Catch::Contains("'reg_tokens' is not a key timm's Eva.__init__ has"));
    // norm_eps is the table's own spelling of the norm's eps, not timm's.
    CHECK_THROWS_WITH(load({{"norm_eps", 1e-5}}), Catch::Contains("model_args.norm_eps = 1e-05"));
    CHECK_THROWS_WITH(load({{"in_chans", 1}}), Catch::Contains("in_chans = 1"));
    // Training-only and read keys load.
    const auto a = load({{"drop_path_rate", 0.1}, {"img_size", 256}, {"dynamic_img_size", true}, {"num_classes", 0}});
    CHECK(a.arg("img_size") == 256);
    CHECK_NOTHROW(load({{"num_reg_tokens", 0}, {"head_init_scale", 0.001}}, "eva02_small_patch14_224"));
    // What the parity fixtures found vitreg does not run: registers with positions, no final norm.
    CHECK_THROWS_WITH(load(nlohmann::json::object(), "vit_so150m_patch16_reg4_gap_256"),
                      Catch::Contains("sets no_embed_class = false (timm's definition): positions for its 4 register tokens too"));
    CHECK_NOTHROW(load({{"no_embed_class", true}}, "vit_so150m_patch16_reg4_gap_256"));
    CHECK_THROWS_WITH(load(nlohmann::json::object(), "vit_intern300m_patch14_448"),
                      Catch::Contains("sets final_norm = false (timm's definition): no final norm"));
}

TEST_CASE("timm's own VisionTransformer and Eva: hub folders, class token, registers, patches and pooled, any grid") {
    const auto index = fixture_json("upstream/timm/cases.json");
    REQUIRE(index["cases"].size() >= 12);
    for (const auto& c : index["cases"]) {
        INFO("timm " << index["commit"].get<std::string>() << " case " << c["name"].get<std::string>());
        const Model m = Model::load(fixture(c["model"].get<std::string>()));
        const std::string size = c["size"].get<std::string>(), key = c["input"].get<std::string>();
        const SafetensorsFile f(fixture(c["expected"].get<std::string>()));
        const Features out = run_upstream_case(m, c, key);
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
        CHECK(cls < kParityTolerance);
        CHECK(regs < kParityTolerance);
        CHECK(patches < kParityTolerance);
        CHECK(pool < kParityTolerance);
    }
}
