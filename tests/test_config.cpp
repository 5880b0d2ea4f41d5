// One description of a configuration: to_json and config_from_json round-trip every field of
// every model the tests have, and the enums' name tables parse, print and refuse alike.
#include <dirent.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "check_config.hpp"
#include "test_support.hpp"
#include "vitreg/canonical_checkpoint.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/config.hpp"
#include "vitreg/error.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

std::vector<std::string> entries(const std::string& dir, const std::string& suffix = "") {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n[0] == '.') continue;
            if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
                out.push_back(dir + "/" + n);
        }
        ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The fields a converted checkpoint's metadata states, read back over a blank Config.
void check_metadata_round_trip(const Config& c) {
    Config back;
    if (c.mlp == MlpKind::SwiGlu) back.mlp = MlpKind::SwiGlu;  // what the tensors tell
    apply_config_metadata(config_metadata(to_json(c)), back, "converted.safetensors");
    CHECK(back.heads == c.heads);
    CHECK(back.patch == c.patch);
    CHECK(back.registers == c.registers);
    CHECK(back.attention == c.attention);
    CHECK(back.trained_attention == c.attention);  // a converted file was trained with what it runs
    CHECK(back.pos_interp == c.pos_interp);
    CHECK(back.eps == c.eps);
    CHECK(back.mean == c.mean);
    CHECK(back.std == c.std);
    CHECK(back.evict_sink == c.evict_sink);
    CHECK(back.family == c.family);
    CHECK(back.mlp == c.mlp);
    CHECK(back.eval_squash == c.eval_squash);
    CHECK(back.positions == c.positions);
    if (c.rotary()) CHECK(back.rope_theta == c.rope_theta);
    if (c.positions == Positions::RopeEva) CHECK(back.rope_ref_grid == c.rope_ref_grid);
    CHECK(back.input_size == c.input_size);
    CHECK(back.crop_pct == c.crop_pct);
    CHECK(back.pipeline == c.pipeline);
    CHECK(back.interpolation == c.interpolation);
}

void check_round_trip(const Config& c) {
    const nlohmann::json j = to_json(c);
    check_same(config_from_json(j), c);
    check_same(config_from_json(nlohmann::json::parse(j.dump())), c);  // through text, as files hold it
    check_metadata_round_trip(c);
}

}  // namespace

TEST_CASE("config: to_json round-trips every shipped, fixture, torch and converted model", "[config]") {
    std::vector<std::string> models = entries(VITREG_WEIGHTS_DIR, ".safetensors");
    const auto fixtures = entries(fixture("models"));
    models.insert(models.end(), fixtures.begin(), fixtures.end());
    for (const char* torch : {"dinov2_f32.pth", "dinov2_bf16.pth", "dinov3_hub.pth", "dinov3_hub_gated.pth"})
        models.push_back(fixture(std::string("torch/") + torch));
    REQUIRE(models.size() > 30);
    for (const auto& path : models) {
        INFO(path);
        check_round_trip(Checkpoint(path).config());
    }
    // Each fixture converted to vitreg's own layout, and one run with another attention kind.
    const TempDir dir;
    for (const auto& path : fixtures) {
        INFO(path);
        const std::string out = dir / "converted.safetensors";
        convert_checkpoint(path, {}, DType::F32, out);
        check_round_trip(Checkpoint(out).config());
    }
    ConfigOverrides retrofit;
    retrofit.attention = AttentionKind::Softmax1;
    check_round_trip(Checkpoint(fixture("models/dinov2_f32.safetensors"), retrofit).config());
}

TEST_CASE("config: the converter's metadata is to_json's values as strings", "[config]") {
    Config c;
    c.heads = 6;
    c.patch = 14;
    c.registers = 4;
    auto meta = config_metadata(to_json(c));
    CHECK(meta == std::map<std::string, std::string>{{"heads", "6"},
                                                     {"patch_size", "14"},
                                                     {"num_registers", "4"},
                                                     {"attention", "softmax"},
                                                     {"pos_interp", "offset"},
                                                     {"layer_norm_eps", "9.99999997e-07"},
                                                     {"image_mean", "0.485000014,0.456,0.405999988"},
                                                     {"image_std", "0.229000002,0.224000007,0.224999994"},
                                                     {"eval_squash", "0"}});
    c.family = Family::Eva;
    c.mlp = MlpKind::QuickGelu;
    c.positions = Positions::RopeEva;
    c.rope_theta = 10000;
    c.rope_ref_grid = {16, 12};
    c.crop_pct = 0.9;
    c.pipeline = PixelPipeline::Timm;
    c.interpolation = ResizeFilter::Bilinear;
    c.evict_sink = true;
    meta = config_metadata(to_json(c));
    CHECK(meta.at("family") == "eva");
    CHECK(meta.at("act") == "quick_gelu");
    CHECK(meta.at("positions") == "rope-eva");
    CHECK(meta.at("rope_theta") == "10000");
    CHECK(meta.at("rope_ref_grid") == "16,12");
    CHECK(meta.at("input_size") == "224");
    CHECK(meta.at("crop_pct") == "0.90000000000000002");
    CHECK(meta.at("image_pipeline") == "timm");
    CHECK(meta.at("interpolation") == "bilinear");
    CHECK(meta.at("evict") == "sink");
    c.mlp = MlpKind::SwiGlu;  // the tensors say so
    CHECK(config_metadata(to_json(c)).count("act") == 0);
}

TEST_CASE("config: a bad value is refused naming its key, an unknown name with the choices", "[config]") {
    const nlohmann::json good = to_json(Config{});
    const auto refused = [&](const char* key, const nlohmann::json& value, const std::string& message) {
        auto j = good;
        j[key] = value;
        CHECK_THROWS_AS(config_from_json(j), ConfigError);
        CHECK_THROWS_WITH(config_from_json(j), Catch::Contains(message));
    };
    refused("attention", "relu", "config key 'attention': unknown attention kind 'relu' (expected softmax, softmax1 or sink)");
    refused("pos_interp", "nearest", "unknown position interpolation 'nearest' (expected offset, antialias, size or corners)");
    refused("family", "beit", "config key 'family': unknown family 'beit' (expected dinov2, dinov3, timm, clip, siglip, eva, torchvision or vit)");
    refused("act", "relu", "(expected gelu, quick_gelu, swiglu or gelu_tanh)");
    refused("positions", "rope", "(expected learned, rope-axial or rope-eva)");
    refused("pool", "max", "(expected token, avg or map)");
    refused("image_pipeline", "pil", "(expected torchvision, timm, hf or open_clip)");
    refused("interpolation", "cubic", "(expected nearest, box, bilinear, hamming, bicubic or lanczos)");
    refused("dim", "384", "config key 'dim' = \"384\" is not an integer");
    refused("crop_pct", true, "config key 'crop_pct' = true is not a number");
    refused("image_mean", "0.5", "config key 'image_mean' = \"0.5\" is the wrong type");
    refused("dim", 1.5, "config key 'dim' = 1.5 is not an integer");
    refused("class_token", 1, "config key 'class_token' = 1 is not true or false");
    refused("evict", "cls", "config key 'evict'");
    auto missing = good;
    missing.erase("heads");
    CHECK_THROWS_WITH(config_from_json(missing), Catch::Contains("config key 'heads' is missing"));
    CHECK_THROWS_AS(config_from_json(nlohmann::json::array()), ConfigError);
}

TEST_CASE("config: each enum's table names, parses and lists its choices", "[config]") {
    CHECK(to_string(AttentionKind::Softmax1) == "softmax1");
    CHECK(to_string(Positions::RopeAxial) == "rope-axial");
    CHECK(to_string(MlpKind::QuickGelu) == "quick_gelu");
    CHECK(to_string(PixelPipeline::OpenClip) == "open_clip");
    CHECK(to_string(ResizeFilter::Lanczos) == "lanczos");
    CHECK(to_string(DType::BF16) == "BF16");
    CHECK(parse_attention_kind("sink") == AttentionKind::Sink);
    CHECK(parse_pos_interp("antialias") == PosInterp::Antialias);
    CHECK(parse_pixel_pipeline("hf") == PixelPipeline::HF);
    CHECK(parse_resize_filter("hamming") == ResizeFilter::Hamming);
    CHECK(parse_enum<Family>("siglip") == Family::Siglip);
    CHECK(enum_names<AttentionKind>() == std::vector<std::string>{"softmax", "softmax1", "sink"});
    CHECK(enum_choices<PixelPipeline>(" | ", " | ") == "torchvision | timm | hf | open_clip");
    CHECK_THROWS_WITH(parse_attention_kind("relu"), "unknown attention kind 'relu' (expected softmax, softmax1 or sink)");
    CHECK_THROWS_WITH(parse_pos_interp("x"), "unknown position interpolation 'x' (expected offset, antialias, size or corners)");
    CHECK_THROWS_WITH(parse_pixel_pipeline("x"), "unknown pipeline 'x' (expected torchvision, timm, hf or open_clip)");
    CHECK_THROWS_WITH(parse_resize_filter("x"), "unknown resize filter 'x' (nearest, box, bilinear, hamming, bicubic or lanczos)");
    CHECK_THROWS_AS(parse_enum<Pool>("max"), UsageError);
    // Every value of every table prints as its name and parses back.
    const auto round_trips = [](auto table_of) {
        using Enum = decltype(table_of);
        for (const auto& e : EnumTable<Enum>::names) CHECK(parse_enum<Enum>(name_of(e.value)) == e.value);
    };
    round_trips(AttentionKind{});
    round_trips(PosInterp{});
    round_trips(MlpKind{});
    round_trips(Family{});
    round_trips(Pool{});
    round_trips(PixelPipeline{});
    round_trips(Positions{});
    round_trips(ResizeFilter{});
    round_trips(DType{});
}

TEST_CASE("config: apply_config_metadata refuses a bad value as the checkpoint loader words it", "[config]") {
    const auto refused = [](const std::string& key, const std::string& value, const std::string& message) {
        Config c;
        CHECK_THROWS_AS(apply_config_metadata({{key, value}}, c, "m.safetensors"), ConfigError);
        CHECK_THROWS_WITH(apply_config_metadata({{key, value}}, c, "m.safetensors"), message);
    };
    refused("heads", "six", "m.safetensors: metadata 'heads' = 'six' is not a valid count");
    refused("layer_norm_eps", "1e-6x", "m.safetensors: metadata 'layer_norm_eps' = '1e-6x' is not a number");
    refused("image_mean", "1,2", "m.safetensors: metadata 'image_mean' = '1,2' is not three numbers");
    refused("image_std", "1,,2", "m.safetensors: metadata 'image_std' = '1,,2' is not three comma-separated numbers");
    refused("attention", "relu", "m.safetensors: metadata unknown attention kind 'relu' (expected softmax, softmax1 or sink)");
    refused("pos_interp", "x", "m.safetensors: metadata unknown position interpolation 'x' (expected offset, antialias, size or corners)");
    refused("family", "beit", "m.safetensors: metadata family='beit' (expected dinov2, dinov3, timm, clip, siglip, eva, torchvision or vit)");
    refused("act", "swiglu", "m.safetensors: metadata act='swiglu' (expected gelu, quick_gelu or gelu_tanh)");
    refused("positions", "rope", "m.safetensors: metadata positions='rope' (expected learned, rope-axial or rope-eva)");
    refused("rope_ref_grid", "16", "m.safetensors: metadata rope_ref_grid='16' is not two counts H,W");
    refused("evict", "cls", "m.safetensors: metadata evict='cls' (the only stored eviction is 'sink')");
    refused("image_pipeline", "pil",
            "m.safetensors: metadata: unknown pipeline 'pil' (expected torchvision, timm, hf or open_clip)");
    refused("interpolation", "cubic",
            "m.safetensors: metadata: unknown resize filter 'cubic' (nearest, box, bilinear, hamming, bicubic or lanczos)");
    Config swiglu;
    swiglu.mlp = MlpKind::SwiGlu;
    apply_config_metadata({{"act", "quick_gelu"}}, swiglu, "m.safetensors");  // the tensors' SwiGLU stands
    CHECK(swiglu.mlp == MlpKind::SwiGlu);
}
