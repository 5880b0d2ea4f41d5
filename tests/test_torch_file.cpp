// PyTorch checkpoint files (tests/fixtures/torch/, written by make_torch_files.py with
// torch.save): they load as the safetensors model they came from, bit for bit, wherever the
// state dict sits; strided and shared storages give their logical values; every hostile or
// unreadable file is refused with a CheckpointError naming the file and the fault, and a
// pickle's payload never runs. Torch hub names resolve in a fake $TORCH_HOME.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model.hpp"
#include "core/hub_cache.hpp"
#include "io/torch_file.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

const char* kOriginal = "models/nometa_f32.safetensors";

std::string torch_fixture(const std::string& name) { return fixture("torch/" + name); }

std::vector<float> test_image(int height, int width) {
    std::vector<float> x(static_cast<std::size_t>(3) * height * width);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 1.5f;
    return x;
}

std::vector<float> test_image(int side) { return test_image(side, side); }

std::vector<std::uint16_t> bits16(const TensorView& t) {
    std::vector<std::uint16_t> out(static_cast<std::size_t>(t.numel()));
    if (!out.empty()) std::memcpy(out.data(), t.data, out.size() * 2);
    return out;
}

// float32 -> bfloat16, round to nearest even (as torch's .bfloat16()).
std::uint16_t to_bf16(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace

TEST_CASE("torch.save state dicts load as the safetensors model they came from, bit for bit", "[torch]") {
    const SafetensorsFile original(fixture(kOriginal));
    const Model want = Model::load(fixture(kOriginal));
    const int side = 5 * want.config().patch;  // a non-native grid
    const auto x = test_image(side);
    const Features f_want = want.forward(x.data(), 1, side, side);

    const std::pair<const char*, const char*> files[] = {
        {"dinov2_f32.pth", ""}, {"nested_model.pth", "model"}, {"teacher_module.pth", "teacher"}, {"strided.pth", ""}};
    for (const auto& [name, key] : files) {
        INFO(name);
        const TorchFile file(torch_fixture(name));
        CHECK(file.state_dict_key() == key);
        CHECK(file.metadata().empty());
        CHECK(file.names() == original.names());  // module. stripped; ints, strings and int64 buffers left out
        for (const auto& tensor : original.names()) {
            INFO(tensor);
            CHECK(file.get(tensor).shape == original.get(tensor).shape);
            CHECK(file.get(tensor).dtype == DType::F32);
            CHECK(file.get(tensor).to_float() == original.get(tensor).to_float());
        }
        const Model got = Model::load(torch_fixture(name));
        CHECK(got.config().dim == want.config().dim);
        CHECK(got.config().depth == want.config().depth);
        CHECK(got.config().heads == want.config().heads);
        CHECK(got.config().parameters == want.config().parameters);
        const Features f = got.forward(x.data(), 1, side, side);
        CHECK(f.cls == f_want.cls);
        CHECK(f.patches == f_want.patches);
    }
}

TEST_CASE("strided and shared storages give their logical values; contiguous ones are read in place", "[torch]") {
    const TorchFile file(torch_fixture("strided.pth"));
    // The two biases of block 0 are views of one storage, 3 and 3 + 192 + 5 elements in: the
    // views point into the mapped storage itself, 197 floats apart.
    const auto& qkv_b = file.get("blocks.0.attn.qkv.bias");
    const auto& proj_b = file.get("blocks.0.attn.proj.bias");
    CHECK(proj_b.data - qkv_b.data == static_cast<std::ptrdiff_t>((192 + 5) * 4));
    // A transposed view (strides swapped) and a column slice are gathered into row-major buffers.
    const SafetensorsFile original(fixture(kOriginal));
    for (const char* name : {"blocks.0.attn.qkv.weight", "blocks.1.mlp.fc1.weight", "norm.weight"}) {
        INFO(name);
        CHECK(file.get(name).to_float() == original.get(name).to_float());
    }
    CHECK(file.skipped() == std::vector<std::string>{"position_ids (LongStorage)"});
    CHECK_FALSE(file.has("num_tokens"));
    CHECK_FALSE(file.has("origin"));
    CHECK_THROWS_WITH(file.get("position_ids"), Catch::Contains("strided.pth") && Catch::Contains("missing tensor 'position_ids'"));
}

TEST_CASE("F16 and BF16 storages keep their dtype and their bits", "[torch]") {
    const SafetensorsFile original(fixture(kOriginal));
    const TorchFile f16(torch_fixture("dinov2_f16.pth"));
    const TorchFile bf16(torch_fixture("dinov2_bf16.pth"));
    CHECK(f16.dominant_dtype() == DType::F16);
    CHECK(bf16.dominant_dtype() == DType::BF16);
    for (const auto& name : original.names()) {
        INFO(name);
        const auto values = original.get(name).to_float();
        std::vector<std::uint16_t> half, brain;
        for (const float v : values) {
            half.push_back(float_to_half(v));
            brain.push_back(to_bf16(v));
        }
        REQUIRE(f16.get(name).dtype == DType::F16);
        REQUIRE(bf16.get(name).dtype == DType::BF16);
        CHECK(bits16(f16.get(name)) == half);
        CHECK(bits16(bf16.get(name)) == brain);
    }
    CHECK(Checkpoint(torch_fixture("dinov2_f16.pth")).config().dtype == DType::F16);
    CHECK(Checkpoint(torch_fixture("dinov2_bf16.pth")).config().dtype == DType::BF16);
}

TEST_CASE("a key path picks the state dict", "[torch]") {
    const std::string small = torch_fixture("small_key.pth");
    CHECK_THROWS_AS(TorchFile(small), CheckpointError);
    CHECK_THROWS_WITH(TorchFile(small), Catch::Contains(small) && Catch::Contains("no state dict") &&
                                            Catch::Contains("'ema', 'step'") && Catch::Contains("--key"));
    const TorchFile file(small, "ema.weights");
    CHECK(file.state_dict_key() == "ema.weights");
    CHECK(file.names() == std::vector<std::string>{"norm.weight", "pos_embed"});
    const SafetensorsFile original(fixture(kOriginal));
    CHECK(file.get("pos_embed").to_float() == original.get("pos_embed").to_float());
    CHECK_THROWS_WITH(TorchFile(small, "ema.nope"), Catch::Contains("'ema' has no key 'nope'") && Catch::Contains("'weights'"));
    CHECK_THROWS_WITH(TorchFile(small, "step"), Catch::Contains("names no dict of tensors"));
    CHECK_THROWS_WITH(TorchFile(small, "ema"), Catch::Contains("a dict without tensors"));

    ConfigOverrides o;
    o.state_dict_key = "model";
    const Model m = Model::load(torch_fixture("nested_model.pth"), o);
    CHECK(m.config().depth == 2);
    o.state_dict_key = "epoch";
    CHECK_THROWS_AS(Model::load(torch_fixture("nested_model.pth"), o), CheckpointError);
    CHECK_THROWS_AS(Model::load(fixture(kOriginal), o), UsageError);  // keys are for PyTorch files
}

TEST_CASE("hostile and unreadable PyTorch files are refused, naming the file and the fault", "[torch]") {
    TempDir dir;
    const std::string marker = dir / "payload-ran";
    ::setenv("VITREG_PICKLE_MARKER", marker.c_str(), 1);
    const std::pair<const char*, std::vector<const char*>> cases[] = {
        {"evil_system.pth", {"refusing to unpickle posix.system", "never runs"}},
        {"evil_proto4.pth", {"refusing to unpickle posix.system"}},
        {"legacy.pth", {"legacy serialization format", "torch.save(torch.load('"}},
        {"bare_pickle.pth", {"a bare pickle, not a torch.save zip archive"}},
        {"torchscript.pt", {"a TorchScript archive", "torch.jit.load(", ".state_dict(), 'model.pth')", "open_clip"}},
        {"deflated.pth", {"zip entry 'deflated/data/0' is compressed (method 8, deflate)"}},
        {"truncated.pth", {"no zip end-of-central-directory record", "truncated"}},
        {"corrupt_cd.pth", {"central directory entry 1", "corrupt"}},
    };
    for (const auto& [name, fragments] : cases) {
        INFO(name);
        const std::string path = torch_fixture(name);
        try {
            TorchFile f(path);
            FAIL("not refused");
        } catch (const CheckpointError& e) {
            const std::string message = e.what();
            INFO(message);
            CHECK(message.rfind(path + ": ", 0) == 0);
            for (const char* fragment : fragments) CHECK_THAT(message, Catch::Contains(fragment));
        }
        // The same through every door: Model::load, whatever the extension says.
        CHECK_THROWS_AS(Model::load(path), CheckpointError);
        const std::string renamed = dir / "renamed.safetensors";
        write_bytes(renamed, read_bytes(path));
        CHECK_THROWS_AS(Model::load(renamed), CheckpointError);
    }
    CHECK_FALSE(exists(marker));
    ::unsetenv("VITREG_PICKLE_MARKER");

    write_bytes(dir / "empty.pth", "");
    CHECK_THROWS_WITH(TorchFile(dir / "empty.pth"), Catch::Contains("empty.pth: empty file"));
    write_bytes(dir / "text.pth", "not a checkpoint at all");
    CHECK_THROWS_WITH(Model::load(dir / "text.pth"), Catch::Contains("text.pth: not a PyTorch checkpoint"));
    CHECK_THROWS_WITH(TorchFile(dir / "missing.pth"), Catch::Contains("missing.pth: cannot open"));
    // Bounds: a state dict's pickle needs far fewer objects than a hostile one could make.
    TorchFileLimits tight;
    tight.max_objects = 50;
    CHECK_THROWS_WITH(TorchFile(torch_fixture("dinov2_f32.pth"), "", tight), Catch::Contains("more than 50 objects"));
    tight = {};
    tight.max_pickle_bytes = 100;
    CHECK_THROWS_WITH(TorchFile(torch_fixture("dinov2_f32.pth"), "", tight), Catch::Contains("over the limit of 100"));
}

TEST_CASE("every truncation and byte flip of a PyTorch file is an error or a file, never a crash", "[torch]") {
    TempDir dir;
    const std::string bytes = read_bytes(torch_fixture("small_key.pth"));
    const std::string path = dir / "mutant.pth";
    std::size_t refused = 0, read = 0;
    const auto attempt = [&](const std::string& data) {
        write_bytes(path, data);
        try {
            const TorchFile f(path, "ema.weights");
            for (const auto& name : f.names()) (void)f.get(name).to_float();
            ++read;
        } catch (const CheckpointError&) {
            ++refused;
        }
    };
    for (std::size_t n = 0; n < bytes.size(); n += 3) attempt(bytes.substr(0, n));
    for (std::size_t i = 0; i < bytes.size(); i += 5) {
        std::string mutant = bytes;
        mutant[i] = static_cast<char>(mutant[i] ^ (1 << (i % 8)));
        attempt(mutant);
    }
    CHECK(refused > 0);
    CHECK(read > 0);  // flips in the storages' bytes still read
}

TEST_CASE("torch hub names resolve in $TORCH_HOME and nothing is downloaded", "[torch][hub]") {
    TorchHome home;
    const std::string checkpoints = home.checkpoints();
    write_bytes(checkpoints + "/dinov2_vits14_reg4_pretrain.pth", read_bytes(torch_fixture("dinov2_f32.pth")));
    write_bytes(checkpoints + "/my_vit.pth", read_bytes(torch_fixture("dinov2_f32.pth")));

    CHECK(resolve_model_path("dinov2_vits14_reg4") == checkpoints + "/dinov2_vits14_reg4_pretrain.pth");
    CHECK(resolve_model_path("my_vit") == checkpoints + "/my_vit.pth");
    const Model hub = Model::load(resolve_model_path("dinov2_vits14_reg4"));
    const Model direct = Model::load(fixture(kOriginal));
    const int side = 4 * direct.config().patch;
    const auto x = test_image(side);
    CHECK(hub.forward(x.data(), 1, side, side).cls == direct.forward(x.data(), 1, side, side).cls);

    CHECK_THROWS_WITH(resolve_model_path("dinov2_vitg14"),
                      Catch::Contains("dinov2_vitg14: not in the torch hub cache") && Catch::Contains(checkpoints) &&
                          Catch::Contains("downloads nothing") &&
                          Catch::Contains("torch.hub.load('facebookresearch/dinov2', 'dinov2_vitg14')"));
    CHECK_THROWS_WITH(resolve_model_path("some_other_model"), Catch::Contains("no such checkpoint file, folder or shipped name"));

    // TORCH_HOME defaults to $XDG_CACHE_HOME/torch.
    ::unsetenv("TORCH_HOME");
    TempDir cache;
    const char* saved_xdg_env = std::getenv("XDG_CACHE_HOME");
    const std::string saved_xdg = saved_xdg_env ? saved_xdg_env : "";
    ::setenv("XDG_CACHE_HOME", cache.path().c_str(), 1);
    REQUIRE(std::system(("mkdir -p '" + cache.path() + "/torch/hub/checkpoints'").c_str()) == 0);
    write_bytes(cache / "torch/hub/checkpoints/dinov2_vitb14_pretrain.pth", "PK");
    CHECK(resolve_model_path("dinov2_vitb14") == cache / "torch/hub/checkpoints/dinov2_vitb14_pretrain.pth");
    CHECK_THROWS_WITH(Model::load(resolve_model_path("dinov2_vitb14")), Catch::Contains("dinov2_vitb14_pretrain.pth: not a PyTorch checkpoint"));
    if (saved_xdg_env) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
    else ::unsetenv("XDG_CACHE_HOME");
}

TEST_CASE("DINOv3's torch hub files: the HF folder's features, the unused k bias masked, the hashed hub name", "[torch][hub]") {
    // The same weights in facebookresearch/dinov3's names (storage_tokens, qkv with a nonzero k
    // bias that bias_mask zeroes, w1/w2/w3, rope_embed.periods) and in HF DINOv3ViTModel's.
    for (const auto& [pth, folder, gated] : {std::tuple{"dinov3_hub.pth", "models/hf_dinov3", false},
                                             std::tuple{"dinov3_hub_gated.pth", "models/hf_dinov3_gated", true}}) {
        INFO(pth);
        const Model hub = Model::load(torch_fixture(pth));
        const Model hf = Model::load(fixture(folder));
        const Config& c = hub.config();
        CHECK(c.source == "dinov3-hub");
        CHECK(c.family == Family::Dinov3);
        CHECK(c.positions == Positions::RopeAxial);
        CHECK(c.heads == hf.config().heads);  // from the rotary periods: head_dim / 4 of them
        CHECK(c.rope_theta == Approx(100.0f).epsilon(1e-5));
        CHECK(c.registers == 4);
        CHECK((c.mlp == MlpKind::SwiGlu) == gated);
        CHECK(c.eps == 1e-5f);
        CHECK(c.pipeline == PixelPipeline::Torchvision);  // the hub's eval transform: short side 256, crop 224
        CHECK_FALSE(c.eval_squash);
        for (const auto& [h, w] : {std::pair{32, 32}, {24, 40}}) {
            const auto x = test_image(h, w);
            const Features a = hub.forward(x.data(), 1, h, w), b = hf.forward(x.data(), 1, h, w);
            CHECK(a.cls == b.cls);
            CHECK(a.patches == b.patches);
            CHECK(a.registers == b.registers);
        }
    }

    TorchHome home;
    const std::string checkpoints = home.checkpoints();
    write_bytes(checkpoints + "/dinov3_vits16_pretrain_lvd1689m-08c60483.pth", read_bytes(torch_fixture("dinov3_hub.pth")));
    CHECK(resolve_model_path("dinov3_vits16") == checkpoints + "/dinov3_vits16_pretrain_lvd1689m-08c60483.pth");
    // ViT-7B/16 is a hub name too (its file: the 7B layout, a DINOv3 hub file like the others).
    write_bytes(checkpoints + "/dinov3_vit7b16_pretrain_lvd1689m-a955f4ea.pth", read_bytes(torch_fixture("dinov3_hub.pth")));
    CHECK(resolve_model_path("dinov3_vit7b16") == checkpoints + "/dinov3_vit7b16_pretrain_lvd1689m-a955f4ea.pth");
    CHECK(torch_hub_repository("dinov3_vit7b16") == "facebookresearch/dinov3");
    CHECK(looks_like_hub_id("facebook/dinov3-vit7b16-pretrain-lvd1689m"));  // its HF repository, from the HF cache
    CHECK_THROWS_WITH(resolve_model_path("dinov3_vitb16"),
                      Catch::Contains("dinov3_vitb16: not in the torch hub cache") && Catch::Contains("_pretrain_*.pth") &&
                          Catch::Contains("torch.hub.load('facebookresearch/dinov3', 'dinov3_vitb16')"));
}
