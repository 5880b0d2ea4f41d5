// HF transformers' own modeling code (tests/upstream/transformers_fixtures.py): small random
// ViTModel / ViTForImageClassification, Dinov2Model, Dinov2WithRegistersModel,
// CLIPVisionModelWithProjection, CLIPModel, SiglipVisionModel, SiglipModel and DINOv3ViTModel saved
// as HF folders, with the float64 forward's final-normed tokens, pooled feature and embedding at the
// native size and a non-square one (each model's own interpolation), at the commit cases.json
// records; loaded from the folder and from a Hugging Face hub cache. Then what vitreg makes of
// ViT's configs and image processors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"

using namespace vitreg;
using namespace vitreg::test;
using json = nlohmann::json;

namespace {


const char* const kVit = "upstream/transformers/vit_model";
const char* const kVitClassifier = "upstream/transformers/vit_classifier";

// `folder` as huggingface_hub caches it under `cache` (snapshots/<commit>/ linking into blobs/);
// returns the hub id.
std::string cache_as_hub(const TempDir& cache, const std::string& folder, const std::string& name) {
    const std::string repo = cache / ("models--upstream--" + name);
    const std::string commit = "0123456789abcdef0123456789abcdef01234567";
    REQUIRE(std::system(("mkdir -p '" + repo + "/refs' '" + repo + "/blobs' '" + repo + "/snapshots/" + commit + "'").c_str()) == 0);
    for (const char* f : {"config.json", "model.safetensors", "preprocessor_config.json"}) {
        if (!std::filesystem::exists(folder + "/" + f)) continue;
        REQUIRE(std::system(("cp '" + folder + "/" + f + "' '" + repo + "/blobs/" + f + ".blob'").c_str()) == 0);
        REQUIRE(std::system(("ln -s ../../blobs/" + std::string(f) + ".blob '" + repo + "/snapshots/" + commit + "/" + f + "'").c_str()) == 0);
    }
    write_bytes(repo + "/refs/main", commit);
    return "upstream/" + name;
}

// A copy of `folder` with its preprocessor_config.json edited.
std::string with_processor(const TempDir& dir, const std::string& folder, const std::string& name,
                           const std::function<void(json&)>& edit) {
    const std::string d = dir / name;
    REQUIRE(std::system(("cp -r '" + fixture(folder) + "' '" + d + "'").c_str()) == 0);
    json j = json::parse(read_bytes(d + "/preprocessor_config.json"));
    edit(j);
    write_bytes(d + "/preprocessor_config.json", j.dump());
    return d;
}

}  // namespace

TEST_CASE("transformers' own ViT, Dinov2, CLIP, SigLIP and DINOv3 towers, any grid") {
    const auto index = fixture_json("upstream/transformers/cases.json");
    REQUIRE(index["cases"].size() >= 22);
    TempDir cache;
    ::setenv("HF_HUB_CACHE", cache.path().c_str(), 1);
    for (const auto& c : index["cases"]) {
        const std::string folder = fixture(c["model"].get<std::string>());
        const std::string name = c["name"].get<std::string>(), size = c["size"].get<std::string>();
        const std::string hub = cache_as_hub(cache, folder, name.substr(0, name.find(' ')) + "-" + size);
        const auto& outputs = c["outputs"];
        const auto has = [&](const char* key) { return std::find(outputs.begin(), outputs.end(), key) != outputs.end(); };
        const SafetensorsFile inputs(fixture(c["inputs"].get<std::string>()));
        const SafetensorsFile f(fixture(c["expected"].get<std::string>()));
        const std::string key = c["input"].get<std::string>();
        const auto input = tensor(inputs, key);
        const int batch = static_cast<int>(inputs.get(key).shape[0]);
        for (const std::string& path : {folder, resolve_model_path(hub)}) {
            INFO("transformers " << index["commit"].get<std::string>() << " case " << name << " from " << path);
            const Model m = Model::load(path);
            const Features out =
                m.forward(input.data(), batch, c["height"].get<int>(), c["width"].get<int>(), ForwardOptions{2});
            CHECK(out.registers == c["registers"].get<int>());
            std::vector<float> pooled;
            for (int b = 0; b < out.batch; ++b) {
                const auto p = out.pooled_of(b);
                pooled.insert(pooled.end(), p.begin(), p.end());
            }
            // Each output the model has: the final-normed class token, registers and patches, the
            // pooled feature (SigLIP's attention pool) and the projected embedding (CLIP's image_embeds).
            const std::pair<const char*, const std::vector<float>*> checked[] = {
                {"cls", &out.cls}, {"registers", &out.reg_tokens}, {"patches", &out.patches},
                {"pooled", &pooled}, {"embedding", &out.embedding}};
            for (const auto& [what, got] : checked) {
                if (!has(what)) continue;
                const double error = relative_error(*got, tensor(f, size + "." + what));
                INFO(what << " " << error);
                CHECK(error < kParityTolerance);
            }
        }
    }
    ::unsetenv("HF_HUB_CACHE");
}

TEST_CASE("HF ViT: the config's defaults and settings, the heads it does not run, ViT's and DeiT's processors") {
    const Config vit = Checkpoint(fixture(kVit)).config();
    CHECK(vit.source == "hf-vit");
    CHECK(vit.eps == Approx(1e-12f));  // stated
    CHECK(vit.mlp == MlpKind::Gelu);
    CHECK(vit.pos_interp == PosInterp::Size);
    CHECK(vit.pool == Pool::Token);
    CHECK((vit.dim == 16 && vit.heads == 2 && vit.depth == 2 && vit.mlp_hidden == 24 && vit.grid == 3 && vit.qkv_bias));
    CHECK_FALSE(vit.layer_scale);
    // ViTImageProcessor: squash to 24x24, bilinear, mean = std = 0.5.
    CHECK((vit.eval_squash && vit.input_size == 24 && vit.crop_pct == 1.0));
    CHECK(vit.interpolation == ResizeFilter::Bilinear);
    CHECK(vit.mean == std::array<float, 3>{0.5f, 0.5f, 0.5f});
    CHECK(std::any_of(vit.notes.begin(), vit.notes.end(), [](const std::string& n) { return n.find("pooler") != std::string::npos; }));

    const Config cls = Checkpoint(fixture(kVitClassifier)).config();
    CHECK(cls.eps == Approx(1e-12f));  // ViTConfig's default: the config.json is silent
    CHECK(cls.mlp == MlpKind::GeluTanh);  // gelu_new
    CHECK_FALSE(cls.qkv_bias);
    CHECK(cls.heads == 4);
    // DeiT's feature extractor: squash to 36x36 bicubic, then a center crop of 32.
    CHECK((cls.eval_squash && cls.input_size == 32 && cls.eval_resize() == 36));
    CHECK(cls.interpolation == ResizeFilter::Bicubic);
    CHECK(cls.mean[0] == Approx(0.485f));
    CHECK(std::any_of(cls.notes.begin(), cls.notes.end(), [](const std::string& n) { return n.find("classifier") != std::string::npos; }));

    Image img;
    img.width = 70;
    img.height = 50;
    img.rgb.assign(static_cast<std::size_t>(img.width) * img.height * 3, 128);
    Geometry g;
    preprocess(img, ResizeSpec::parse("eval"), cls, "x", &g);
    CHECK((g.resized_width == 36 && g.resized_height == 36 && g.crop_left == 2 && g.crop_top == 2 && g.width == 32 && g.height == 32));
    preprocess(img, ResizeSpec::parse("eval"), vit, "x", &g);
    CHECK((g.resized_width == 24 && g.resized_height == 24 && g.crop_left == 0 && g.width == 24));

    TempDir dir;
    // DeiT's class crops when the file is silent; a file may switch it off.
    CHECK(Checkpoint(with_processor(dir, kVitClassifier, "silent", [](json& j) { j.erase("do_center_crop"); })).config().input_size == 32);
    const Config no_crop = Checkpoint(with_processor(dir, kVitClassifier, "off", [](json& j) { j["do_center_crop"] = false; })).config();
    CHECK((no_crop.input_size == 36 && no_crop.crop_pct == 1.0));
    CHECK_THROWS_WITH(Checkpoint(with_processor(dir, kVit, "bit", [](json& j) { j["image_processor_type"] = "BitImageProcessor"; })),
                      Catch::Contains("preprocessor_config.json: image_processor_type = \"BitImageProcessor\" is not an image "
                                      "processor vitreg runs for model_type vit"));
    CHECK_THROWS_WITH(Checkpoint(with_processor(dir, kVit, "raw", [](json& j) { j["do_normalize"] = false; })),
                      Catch::Contains("preprocessor_config.json: do_normalize = false is not a setting vitreg runs"));
    CHECK_THROWS_WITH(Checkpoint(with_processor(dir, kVit, "scale", [](json& j) { j["rescale_factor"] = 1.0; })),
                      Catch::Contains("preprocessor_config.json: rescale_factor = 1.0 is not a setting vitreg runs (it runs 1/255)"));
    CHECK_THROWS_WITH(Checkpoint(with_processor(dir, kVit, "wide", [](json& j) { j["size"] = {{"height", 24}, {"width", 32}}; })),
                      Catch::Contains("preprocessor_config.json: size = {\"height\":24,\"width\":32} is not a setting vitreg runs"));
}

TEST_CASE("HF ViT: another model_type beside ViT's tensors is refused by name") {
    TempDir dir;
    const std::string d = dir / "deit";
    REQUIRE(std::system(("cp -r '" + fixture(kVit) + "' '" + d + "'").c_str()) == 0);
    json j = json::parse(read_bytes(d + "/config.json"));
    j["model_type"] = "deit";
    write_bytes(d + "/config.json", j.dump());
    CHECK_THROWS_WITH(Checkpoint(d), Catch::Contains("config.json: model_type 'deit' is not a model vitreg runs"));
    j["model_type"] = "dinov2";
    j["architectures"] = {"Dinov2Model"};
    write_bytes(d + "/config.json", j.dump());
    CHECK_THROWS_WITH(Checkpoint(d), Catch::Contains("model_type 'dinov2' does not match the tensors beside it (hf-vit names)"));
}
