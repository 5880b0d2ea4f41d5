// Loading: layouts resolve, and every kind of broken or contradictory checkpoint fails with
// a message naming the file and the fault, never a crash.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model.hpp"

using namespace vitreg;
using namespace vitreg::test;
using nlohmann::json;

namespace {

struct Parsed {
    json header;
    std::string data;
};

Parsed split(const std::string& bytes) {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

std::string join(const json& header, const std::string& data) {
    const std::string h = header.dump();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<std::uint64_t>(h.size()) >> (8 * i)) & 0xff);
    return out + h + data;
}

// Copies a fixture model into `dir` as `name`, letting `edit` change its header first.
std::string variant(const TempDir& dir, const std::string& name, const std::string& model,
                    const std::function<void(json&)>& edit) {
    Parsed p = split(read_bytes(fixture(model)));
    edit(p.header);
    const std::string path = dir / name;
    write_bytes(path, join(p.header, p.data));
    return path;
}

const char* kDino = "models/dinov2_f32.safetensors";

}  // namespace

TEST_CASE("layouts and defaults resolve as docs/design.md says") {
    CHECK(Checkpoint(fixture("models/dinov2_f32.safetensors")).config().pos_interp == PosInterp::Offset);
    CHECK(Checkpoint(fixture("models/dinov2_reg2_f16.safetensors")).config().pos_interp == PosInterp::Antialias);
    CHECK(Checkpoint(fixture("models/dinov2_reg2_f16.safetensors")).config().dtype == DType::F16);
    const Checkpoint timm(fixture("models/timm_reg2_bf16.safetensors"));
    CHECK(timm.config().source == "timm-reg");
    CHECK(timm.config().dtype == DType::BF16);
    CHECK(timm.config().eps == Approx(1e-5));
    CHECK(Checkpoint(fixture("models/hf_dinov2")).config().pos_interp == PosInterp::Size);
    CHECK(Checkpoint(fixture("models/hf_reg2")).config().pos_interp == PosInterp::Antialias);
    const Checkpoint swiglu(fixture("models/hf_swiglu"));
    CHECK(swiglu.config().mlp == MlpKind::SwiGlu);
    CHECK(swiglu.config().mlp_hidden == 64);
    const Checkpoint sink(fixture("models/sink_reg2_f32.safetensors"));
    CHECK(sink.config().attention == AttentionKind::Sink);
    const Checkpoint nometa(fixture("models/nometa_f32.safetensors"));
    CHECK(nometa.config().heads == 1);
    REQUIRE(nometa.config().notes.size() == 1);
    CHECK_THAT(nometa.config().notes[0], Catch::Contains("assumed D/64"));
}

TEST_CASE("a retrofit is noted") {
    const Checkpoint ck(fixture(kDino), ConfigOverrides{AttentionKind::Sink, {}});
    CHECK(ck.config().retrofit());
    REQUIRE_FALSE(ck.config().notes.empty());
    CHECK_THAT(ck.config().notes.back(), Catch::Contains("trained with softmax, running sink with sink logit 0"));
}

TEST_CASE("broken safetensors files fail with the file and the fault") {
    TempDir dir;
    const std::string good = read_bytes(fixture(kDino));
    auto check = [&](const std::string& name, const std::string& bytes, const std::string& fault) {
        INFO(name);
        write_bytes(dir / name, bytes);
        CHECK_THROWS_WITH(Model::load(dir / name), Catch::Contains(name) && Catch::Contains(fault));
    };
    check("short.safetensors", "abc", "too short");
    check("empty.safetensors", "", "too short");
    check("cut.safetensors", good.substr(0, good.size() / 2), "outside");
    check("header-past-end.safetensors", good.substr(0, 8) + "{}", "header claims");
    std::string huge = good;
    huge[5] = 0x7f;
    check("huge-header.safetensors", huge, "over the limit");
    std::string garbled = good;
    garbled[9] = '#';
    check("garbled.safetensors", garbled, "not valid JSON");
    check("deep.safetensors", join(json::parse(std::string(200, '[') + std::string(200, ']')), ""), "nesting deeper");
    check("not-object.safetensors", join(json::array({1, 2}), ""), "not a JSON object");

    auto edited = [&](const std::string& name, const std::function<void(json&)>& edit, const std::string& fault) {
        INFO(name);
        CHECK_THROWS_WITH(Model::load(variant(dir, name, kDino, edit)), Catch::Contains(name) && Catch::Contains(fault));
    };
    edited("past-end.safetensors", [](json& h) { h["norm.bias"]["data_offsets"][1] = 1u << 30; }, "outside");
    edited("dtype.safetensors", [](json& h) { h["norm.bias"]["dtype"] = "I64"; }, "dtype 'I64'");
    edited("bytes.safetensors", [](json& h) { h["norm.bias"]["shape"] = {65}; }, "bytes for shape [65]");
    edited("negative.safetensors", [](json& h) { h["norm.bias"]["shape"] = {-64}; }, "negative");
    edited("overlap.safetensors", [](json& h) { h["norm.bias"]["data_offsets"] = h["norm.weight"]["data_offsets"]; },
           "overlap");
    edited("shape.safetensors", [](json& h) { h["blocks.1.attn.qkv.weight"]["shape"] = {64, 192}; },
           "'blocks.1.attn.qkv.weight' has shape [64, 192], expected [192, 64]");
    edited("missing.safetensors", [](json& h) { h.erase("blocks.1.mlp.fc2.weight"); },
           "missing tensor 'blocks.1.mlp.fc2.weight'");
    edited("foreign.safetensors", [](json& h) {
        h["weight"] = h["patch_embed.proj.weight"];
        h.erase("patch_embed.proj.weight");
    }, "not a ViT checkpoint");
    edited("pos.safetensors", [](json& h) {  // 15 rows: neither 1+M*M nor M*M (no_embed_class) positions
        h["pos_embed"]["shape"] = {1, 15, 64};
        h["pos_embed"]["data_offsets"][1] = h["pos_embed"]["data_offsets"][1].get<std::uint64_t>() - 2 * 64 * 4;
    }, "not a square grid");
    edited("meta-string.safetensors", [](json& h) { h["__metadata__"]["heads"] = 4; }, "not a string");
}

TEST_CASE("configs that contradict the tensors are refused") {
    TempDir dir;
    auto edited = [&](const std::string& name, const char* model, const std::function<void(json&)>& edit,
                      const std::string& fault) {
        INFO(name);
        CHECK_THROWS_AS(Model::load(variant(dir, name, model, edit)), ConfigError);
        CHECK_THROWS_WITH(Model::load(dir / name), Catch::Contains(name) && Catch::Contains(fault));
    };
    edited("heads.safetensors", kDino, [](json& h) { h["__metadata__"]["heads"] = "5"; }, "5 heads do not divide the width 64");
    edited("heads-text.safetensors", kDino, [](json& h) { h["__metadata__"]["heads"] = "four"; }, "not a valid count");
    edited("patch.safetensors", kDino, [](json& h) { h["__metadata__"]["patch_size"] = "14"; },
           "patch_size is stated as 14 but the tensors say 4");
    edited("regs.safetensors", "models/dinov2_reg2_f16.safetensors", [](json& h) { h["__metadata__"]["num_registers"] = "4"; },
           "num_registers is stated as 4 but the tensors say 2");
    edited("nosinks.safetensors", kDino, [](json& h) { h["__metadata__"]["attention"] = "sink"; }, "no 'blocks.i.attn.sinks'");
    edited("sinks.safetensors", "models/sink_reg2_f32.safetensors", [](json& h) { h["__metadata__"]["attention"] = "softmax"; },
           "holds sink logits");
    edited("kind.safetensors", kDino, [](json& h) { h["__metadata__"]["attention"] = "relu"; }, "unknown attention kind 'relu'");
    edited("interp.safetensors", kDino, [](json& h) { h["__metadata__"]["pos_interp"] = "nearest"; }, "'nearest'");
    edited("eps.safetensors", kDino, [](json& h) { h["__metadata__"]["layer_norm_eps"] = "-1"; }, "must be positive");
    edited("mean.safetensors", kDino, [](json& h) { h["__metadata__"]["image_mean"] = "0.5,0.5"; }, "three");
}

TEST_CASE("HF checkpoints need a config.json that agrees") {
    TempDir dir;
    const std::string model = dir / "hf";
    std::system(("mkdir -p '" + model + "' && cp '" + fixture("models/hf_dinov2/model.safetensors") + "' '" + model + "/'").c_str());
    CHECK_THROWS_WITH(Model::load(model), Catch::Contains("needs a sibling config.json"));
    json cfg = json::parse(read_bytes(fixture("models/hf_dinov2/config.json")));
    cfg["hidden_size"] = 128;
    write_bytes(model + "/config.json", cfg.dump());
    CHECK_THROWS_WITH(Model::load(model), Catch::Contains("config.json") && Catch::Contains("hidden_size is stated as 128 but the tensors say 64"));
    write_bytes(model + "/config.json", "{\"hidden_size\": ");
    CHECK_THROWS_WITH(Model::load(model), Catch::Contains("config.json") && Catch::Contains("not valid JSON"));
    CHECK_THROWS_WITH(Model::load(dir.path()), Catch::Contains("no model.safetensors"));
}

TEST_CASE("model names resolve to shipped checkpoints") {
    CHECK_THAT(resolve_model_path("vitreg-untrained-s14-d192-reg4"), Catch::EndsWith("vitreg-untrained-s14-d192-reg4.safetensors"));
    CHECK_THROWS_WITH(resolve_model_path("no-such-model"), Catch::Contains("no-such-model") && Catch::Contains("vitreg-untrained"));
}

TEST_CASE("hub ids resolve to snapshots already in the Hugging Face cache and to nothing else") {
    // The layout huggingface_hub writes: refs/<branch or tag> holds a commit, snapshots/<commit>/
    // holds links into blobs/.
    TempDir cache;
    const std::string repo = cache / "models--acme--tiny-dinov2";
    const std::string commit = "0123456789abcdef0123456789abcdef01234567";
    REQUIRE(std::system(("mkdir -p '" + repo + "/refs' '" + repo + "/blobs' '" + repo + "/snapshots/" + commit + "'").c_str()) == 0);
    for (const char* f : {"config.json", "model.safetensors"}) {
        REQUIRE(std::system(("cp '" + fixture(std::string("models/hf_dinov2/") + f) + "' '" + repo + "/blobs/" + f + ".blob'").c_str()) == 0);
        REQUIRE(std::system(("ln -s ../../blobs/" + std::string(f) + ".blob '" + repo + "/snapshots/" + commit + "/" + f + "'").c_str()) == 0);
    }
    write_bytes(repo + "/refs/main", commit);
    write_bytes(repo + "/refs/v1", commit + "\n");
    ::setenv("HF_HUB_CACHE", cache.path().c_str(), 1);

    const std::string snapshot = repo + "/snapshots/" + commit;
    CHECK(resolve_model_path("acme/tiny-dinov2") == snapshot);
    CHECK(resolve_model_path("acme/tiny-dinov2@v1") == snapshot);
    CHECK(resolve_model_path("acme/tiny-dinov2@" + commit) == snapshot);
    // It is the same model as the folder it came from.
    const Model hub = Model::load(resolve_model_path("acme/tiny-dinov2"));
    const Model direct = Model::load(fixture("models/hf_dinov2"));
    const int side = 4 * direct.config().patch;
    std::vector<float> x(static_cast<std::size_t>(3) * side * side);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
    CHECK(hub.forward(x.data(), 1, side, side).cls == direct.forward(x.data(), 1, side, side).cls);

    CHECK_THROWS_WITH(resolve_model_path("acme/missing"),
                      Catch::Contains("acme/missing: not in the Hugging Face cache") &&
                          Catch::Contains("downloads nothing") && Catch::Contains("huggingface-cli download acme/missing"));
    CHECK_THROWS_WITH(resolve_model_path("acme/tiny-dinov2@v2"), Catch::Contains("revision 'v2' is not cached"));
    // A snapshot with PyTorch weights only (a torch.save file linked from blobs/) loads them; the
    // explicit hf: prefix names the same snapshot.
    const std::string bin_only = cache / "models--acme--bin-only";
    REQUIRE(std::system(("mkdir -p '" + bin_only + "/refs' '" + bin_only + "/blobs' '" + bin_only + "/snapshots/abc'").c_str()) == 0);
    write_bytes(bin_only + "/refs/main", "abc");
    REQUIRE(std::system(("cp '" + fixture("torch/dinov2_f32.pth") + "' '" + bin_only + "/blobs/0badc0de'").c_str()) == 0);
    REQUIRE(std::system(("ln -s ../../blobs/0badc0de '" + bin_only + "/snapshots/abc/pytorch_model.bin'").c_str()) == 0);
    CHECK(resolve_model_path("hf:acme/bin-only") == bin_only + "/snapshots/abc");
    const Model pth = Model::load(resolve_model_path("acme/bin-only"));
    const Model original = Model::load(fixture("models/nometa_f32.safetensors"));
    const int pth_side = 4 * original.config().patch;
    std::vector<float> y(static_cast<std::size_t>(3) * pth_side * pth_side, 0.5f);
    CHECK(pth.forward(y.data(), 1, pth_side, pth_side).cls == original.forward(y.data(), 1, pth_side, pth_side).cls);
    CHECK_THROWS_WITH(resolve_model_path("hf:acme/missing@v1"), Catch::Contains("huggingface-cli download acme/missing"));
    CHECK_THROWS_WITH(resolve_model_path("hf:acme"), Catch::Contains("not a Hugging Face hub id"));
    ::unsetenv("HF_HUB_CACHE");
    // Paths are never taken for hub ids.
    for (const char* path : {"./acme/tiny-dinov2", "/acme/tiny-dinov2", "acme/tiny/dinov2", "../acme"}) {
        INFO(path);
        CHECK_THROWS_WITH(resolve_model_path(path), Catch::Contains("no such checkpoint file, folder or shipped name"));
    }
}

TEST_CASE("timm names resolve as timm.create_model finds them in the Hugging Face cache", "[hub]") {
    // timm keeps NAME.TAG's weights in the hub repository timm/NAME.TAG; a bare NAME is its
    // default tag, which only timm's table knows: the one cached, or timm/NAME itself.
    TempDir cache, torch_home;
    auto cached = [&](const std::string& name) {
        const std::string repo = cache / ("models--timm--" + name);
        REQUIRE(std::system(("mkdir -p '" + repo + "/refs' '" + repo + "/snapshots/c0ffee'").c_str()) == 0);
        write_bytes(repo + "/refs/main", "c0ffee");
        return repo + "/snapshots/c0ffee";
    };
    const std::string webli = cached("vit_x_patch14_siglip_224.webli"), plain = cached("vit_z_224");
    const std::string b = cached("vit_y_224.b");
    cached("vit_y_224.a");
    ::setenv("HF_HUB_CACHE", cache.path().c_str(), 1);
    ::setenv("TORCH_HOME", torch_home.path().c_str(), 1);
    for (const char* name : {"vit_x_patch14_siglip_224.webli", "vit_x_patch14_siglip_224", "timm:vit_x_patch14_siglip_224",
                             "timm:vit_x_patch14_siglip_224.webli", "hf-hub:timm/vit_x_patch14_siglip_224.webli",
                             "hf_hub:timm/vit_x_patch14_siglip_224.webli"}) {
        INFO(name);
        CHECK(resolve_model_path(name) == webli);
    }
    CHECK(resolve_model_path("vit_z_224") == plain);
    CHECK(resolve_model_path("vit_y_224.b") == b);
    CHECK_THROWS_WITH(resolve_model_path("vit_y_224"),
                      Catch::Contains("several pretrained tags") && Catch::Contains("timm/vit_y_224.a, timm/vit_y_224.b"));
    // Not cached: refused, saying where it looked; nothing is fetched.
    CHECK_THROWS_WITH(resolve_model_path("vit_q_224"),
                      Catch::Contains("no such checkpoint file, folder or shipped name") &&
                          Catch::Contains(cache.path() + " (no models--timm--vit_q_224 nor models--timm--vit_q_224.* in it)"));
    CHECK_THROWS_WITH(resolve_model_path("vit_x_patch14_siglip_224.openai"),
                      Catch::Contains("models--timm--vit_x_patch14_siglip_224.openai"));
    CHECK_THROWS_WITH(resolve_model_path("timm:vit_q_224.webli"),
                      Catch::Contains("timm:vit_q_224.webli: not in the Hugging Face cache") &&
                          Catch::Contains("downloads nothing") && Catch::Contains("timm.create_model('vit_q_224.webli'"));
    CHECK_THROWS_WITH(resolve_model_path("timm:Vit/x"), Catch::Contains("not a timm model name"));
    ::unsetenv("HF_HUB_CACHE");
    ::unsetenv("TORCH_HOME");
}
