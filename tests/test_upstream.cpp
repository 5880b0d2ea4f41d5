// The forward against the code that made the checkpoints (tests/upstream/): small random models
// built, saved and run (float64) by each upstream's own modules, at the commit their cases.json
// records; and the refusals of the settings those upstreams have that vitreg does not run.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <functional>
#include <set>

#include "core/checkpoint/open_clip_keys.hpp"
#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model.hpp"

using namespace vitreg;
using namespace vitreg::test;
using json = nlohmann::json;

namespace {


}  // namespace

TEST_CASE("open_clip's own VisionTransformer: embedding, pooled feature and tokens") {
    const auto index = fixture_json("upstream/open_clip/cases.json");
    REQUIRE(index["cases"].size() >= 5);
    for (const auto& c : index["cases"]) {
        INFO("open_clip " << index["commit"].get<std::string>() << " case " << c["name"].get<std::string>());
        const Model m = Model::load(fixture(c["model"].get<std::string>()));
        const SafetensorsFile f(fixture(c["expected"].get<std::string>()));
        const auto input = tensor(f, "input");
        const int batch = static_cast<int>(f.get("input").shape[0]);
        const Features out = m.forward(input.data(), batch, c["height"].get<int>(), c["width"].get<int>(), ForwardOptions{2});
        const double embedding = relative_error(out.embedding, tensor(f, "embedding"));
        const double patches = relative_error(out.patches, tensor(f, "patches"));
        INFO("embedding " << embedding << ", patches " << patches);
        CHECK(embedding < kParityTolerance);
        CHECK(patches < kParityTolerance);
        const std::string pooled_is = c["pooled_is"].get<std::string>();
        if (!pooled_is.empty()) CHECK(relative_error(pooled_is == "cls" ? out.cls : out.pooled, tensor(f, "pooled")) < kParityTolerance);
    }
}

TEST_CASE("open_clip's keys at the fixtures' commit are each known: read, inert or run only at some values") {
    const auto index = fixture_json("upstream/open_clip/cases.json");
    const auto names = [](const std::vector<source::ConfigKey>& keys) {
        std::set<std::string> out;
        for (const auto& k : keys) out.insert(k.key);
        return out;
    };
    const auto vision = names(source::open_clip_vision_keys()), model = names(source::open_clip_model_keys());
    for (const auto& key : index["keys"]["model_cfg.vision_cfg"]) {
        INFO("vision_cfg." << key.get<std::string>() << " is new upstream: read it, or list it inert or refused");
        CHECK(vision.count(key.get<std::string>()) == 1);
    }
    CHECK(vision.size() == index["keys"]["model_cfg.vision_cfg"].size());  // none listed that open_clip dropped
    for (const auto& key : index["keys"]["model_cfg"]) {
        INFO("model_cfg." << key.get<std::string>() << " is new upstream");
        CHECK(model.count(key.get<std::string>()) == 1);
    }
}

TEST_CASE("open_clip configs: every vision_cfg key read, inert or refused by name and value") {
    TempDir dir;
    const auto with = [&](const std::string& name, const std::function<void(json&)>& edit) {
        const std::string d = dir / name;
        REQUIRE(std::system(("cp -r '" + fixture("upstream/open_clip/avg") + "' '" + d + "'").c_str()) == 0);
        json j = json::parse(read_bytes(d + "/open_clip_config.json"));
        edit(j["model_cfg"]);
        write_bytes(d + "/open_clip_config.json", j.dump());
        return d;
    };
    const std::string file = "open_clip_config.json: model_cfg.";
    // A key open_clip's dataclass does not have (open_clip raises TypeError).
    CHECK_THROWS_WITH(Checkpoint(with("unknown", [](json& m) { m["vision_cfg"]["pos_dropout"] = 0.5; })),
                      Catch::Contains(file + "vision_cfg.pos_dropout = 0.5: 'pos_dropout' is not a key open_clip's CLIPVisionCfg has"));
    CHECK_THROWS_WITH(Checkpoint(with("unknown_model", [](json& m) { m["vision_tower"] = "x"; })),
                      Catch::Contains(file + "vision_tower = \"x\": 'vision_tower' is not a key open_clip's model_cfg has"));
    // Settings it has that vitreg does not run.
    const std::pair<const char*, json> refused[] = {{"qk_norm", true},          {"attentional_pool", true},
                                                    {"scaled_cosine_attn", true}, {"scale_heads", true},
                                                    {"scale_attn_inner", true},   {"scale_attn", true},
                                                    {"scale_fc", true},           {"block_type", "custom"},
                                                    {"pos_embed_type", "rope"},   {"pool_type", "none"}};
    for (const auto& entry : refused) {
        const std::string key = entry.first;  // (clang 14 lets no lambda capture a structured binding)
        const json& value = entry.second;
        INFO(key);
        CHECK_THROWS_WITH(Checkpoint(with("refused_" + key, [&](json& m) { m["vision_cfg"][key] = value; })),
                          Catch::Contains(file + "vision_cfg." + key + " = " + value.dump() + " is not a setting vitreg runs"));
    }
    CHECK_THROWS_WITH(Checkpoint(with("act_kwargs", [](json& m) { m["vision_cfg"]["act_kwargs"] = {{"alpha", 2}}; })),
                      Catch::Contains(file + "vision_cfg.act_kwargs = {\"alpha\":2} is not a setting vitreg runs"));
    CHECK_THROWS_WITH(Checkpoint(with("norm_kwargs", [](json& m) { m["vision_cfg"]["norm_kwargs"] = {{"elementwise_affine", false}}; })),
                      Catch::Contains(file + "vision_cfg.norm_kwargs.elementwise_affine = false"));
    // Inert keys load, and change nothing.
    const std::string inert = with("inert", [](json& m) {
        m["vision_cfg"]["patch_dropout"] = 0.5;
        m["vision_cfg"]["output_tokens"] = true;
        m["vision_cfg"]["attn_pooler_heads"] = 4;
        m["vision_cfg"]["pos_embed_type"] = "sin_cos_2d";
        m["text_cfg"] = {{"width", 8}};
        m["init_logit_bias"] = -10;
    });
    CHECK(Checkpoint(inert).config().pool == Pool::Avg);
}

TEST_CASE("HF config.json: hidden_act is read, and an activation vitreg does not run is refused") {
    TempDir dir;
    const auto with_act = [&](const std::string& source, const std::string& act) {
        const std::string d = dir / (act + "_" + std::to_string(std::hash<std::string>()(source)));
        REQUIRE(std::system(("cp -r '" + fixture(source) + "' '" + d + "'").c_str()) == 0);
        json j = json::parse(read_bytes(d + "/config.json"));
        (j.contains("vision_config") ? j["vision_config"] : j)["hidden_act"] = act;
        write_bytes(d + "/config.json", j.dump());
        return d;
    };
    for (const char* source : {"models/hf_dinov2", "models/hf_clip"}) {
        INFO(source);
        CHECK_THROWS_WITH(Checkpoint(with_act(source, "relu")),
                          Catch::Contains("config.json: hidden_act = \"relu\" is not a setting vitreg runs"));
        CHECK(Checkpoint(with_act(source, "gelu_new")).config().mlp == MlpKind::GeluTanh);
        CHECK(Checkpoint(with_act(source, "quick_gelu")).config().mlp == MlpKind::QuickGelu);
        CHECK(Checkpoint(with_act(source, "gelu")).config().mlp == MlpKind::Gelu);
    }
}

TEST_CASE("torchvision's own VisionTransformer: its safetensors and .pth, native and interpolate_embeddings' grid") {
    const auto index = fixture_json("upstream/torchvision/cases.json");
    REQUIRE(index["cases"].size() >= 2);
    for (const std::string file : {"upstream/torchvision/vit_tiny.safetensors", "upstream/torchvision/vit_tiny.pth"}) {
        const Model m = Model::load(fixture(file));
        CHECK(m.config().family == Family::Torchvision);
        CHECK(m.config().pos_interp == PosInterp::Corners);
        CHECK(m.config().interpolation == ResizeFilter::Bilinear);
        CHECK(m.config().crop_pct == Approx(224.0 / 256.0));
        for (const auto& c : index["cases"]) {
            INFO(index["commit"].get<std::string>() << ": " << file << ", case " << c["name"].get<std::string>());
            const SafetensorsFile f(fixture(c["expected"].get<std::string>()));
            const auto input = tensor(f, "input");
            const int batch = static_cast<int>(f.get("input").shape[0]);
            const Features out = m.forward(input.data(), batch, c["height"].get<int>(), c["width"].get<int>(), ForwardOptions{2});
            const double cls = relative_error(out.cls, tensor(f, "cls")), patches = relative_error(out.patches, tensor(f, "patches"));
            INFO("cls " << cls << ", patches " << patches);
            CHECK(cls < kParityTolerance);
            CHECK(patches < kParityTolerance);
        }
    }
}

TEST_CASE("torch hub names: torchvision's vit_* (NAME-HASH.pth) and DINO's dino_vit* (its release names)") {
    TorchHome home;
    const std::string checkpoints = home.checkpoints();
    write_bytes(checkpoints + "/vit_b_16-c867db91.pth", read_bytes(fixture("upstream/torchvision/vit_tiny.pth")));
    write_bytes(checkpoints + "/dino_deitsmall16_pretrain.pth", read_bytes(fixture("torch/dinov2_f32.pth")));
    CHECK(resolve_model_path("vit_b_16") == checkpoints + "/vit_b_16-c867db91.pth");
    CHECK(Model::load(resolve_model_path("vit_b_16")).config().family == Family::Torchvision);
    CHECK(resolve_model_path("dino_vits16") == checkpoints + "/dino_deitsmall16_pretrain.pth");
    CHECK_THROWS_WITH(resolve_model_path("vit_l_16"), Catch::Contains("vit_l_16: not in the torch hub cache") &&
                                                          Catch::Contains("vit_l_16-*.pth") &&
                                                          Catch::Contains("torch.hub.load('pytorch/vision', 'vit_l_16')"));
    CHECK_THROWS_WITH(resolve_model_path("dino_vitb8"), Catch::Contains("torch.hub.load('facebookresearch/dino:main', 'dino_vitb8')"));
}
