// The forward against the independent PyTorch reference (tests/reference/vit_reference.py):
// every layout, dtype, attention kind and position-interpolation mode, native and non-native
// grids, and the other families (timm ViTs, CLIP in three layouts: docs/design.md, "Families").
// Fixtures come from tests/fixtures/make_fixtures.py.
#include <catch2/catch.hpp>
#include <tbb/task_arena.h>
#include <nlohmann/json.hpp>
#include <map>
#include <thread>

#include "test_support.hpp"
#include "vitreg/model.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

constexpr double kTolerance = 1e-4;  // relative to the output's scale

nlohmann::json parity_cases() { return fixture_json("cases.json"); }

ConfigOverrides overrides_of(const nlohmann::json& c) {
    ConfigOverrides o;
    if (!c["attention_override"].get<std::string>().empty())
        o.attention = parse_attention_kind(c["attention_override"].get<std::string>());
    if (!c["pos_interp_override"].get<std::string>().empty())
        o.pos_interp = parse_pos_interp(c["pos_interp_override"].get<std::string>());
    return o;
}

}  // namespace

TEST_CASE("forward matches the PyTorch reference on every fixture case") {
    const auto all = parity_cases();
    REQUIRE(all.size() >= 30);
    for (const auto& c : all) {
        const std::string name = c["case"].get<std::string>();
        INFO("case " << name);
        const Model m = Model::load(fixture(c["model"].get<std::string>()), overrides_of(c));
        const auto& want = c["config"];
        CHECK(m.config().dim == want["dim"].get<int>());
        CHECK(m.config().depth == want["depth"].get<int>());
        CHECK(m.config().heads == want["heads"].get<int>());
        CHECK(m.config().patch == want["patch"].get<int>());
        CHECK(m.config().grid == want["grid"].get<int>());
        CHECK(m.config().registers == want["registers"].get<int>());
        CHECK(to_string(m.config().attention) == want["attention"].get<std::string>());
        CHECK(to_string(m.config().pos_interp) == want["pos_interp"].get<std::string>());
        CHECK(to_string(m.config().mlp) == want["mlp"].get<std::string>());
        CHECK(m.config().eps == Approx(want["eps"].get<double>()));
        // The family facts a record holds where they differ from DINOv2's defaults.
        const Config& got = m.config();
        CHECK(to_string(got.family) == want.value("family", "dinov2"));
        CHECK(got.class_token == want.value("class_token", true));
        // (timm_reg: the reference keeps a zero class row where vitreg gives the class token none)
        if (c["layout"] != "timm_reg") CHECK(got.pos_embed_class == want.value("pos_embed_class", true));
        CHECK(got.pre_norm == want.value("pre_norm", false));
        CHECK(got.final_norm == want.value("final_norm", true));
        CHECK(got.fc_norm == want.value("fc_norm", false));
        CHECK(got.proj_dim == want.value("proj_dim", 0));
        CHECK(got.input_size == want.value("input_size", 224));
        CHECK(got.crop_pct == Approx(want.value("crop_pct", 0.875)));
        const auto mean = want.value("mean", std::vector<double>{0.485, 0.456, 0.406});
        const auto stdev = want.value("std", std::vector<double>{0.229, 0.224, 0.225});
        for (int k = 0; k < 3; ++k) {
            CHECK(got.mean[k] == Approx(mean[k]));
            CHECK(got.std[k] == Approx(stdev[k]));
        }

        const SafetensorsFile f(fixture(name));
        const auto input = tensor(f, "input");
        const int batch = static_cast<int>(f.get("input").shape[0]);
        const int h = c["height"].get<int>(), w = c["width"].get<int>();
        const Features out = m.forward(input.data(), batch, h, w, ForwardOptions{2});
        CHECK(out.grid_h * m.config().patch == h);
        CHECK(out.grid_w * m.config().patch == w);
        CHECK(relative_error(out.cls, tensor(f, "cls")) < kTolerance);
        CHECK(relative_error(out.patches, tensor(f, "patches")) < kTolerance);
        if (m.config().registers > 0) CHECK(relative_error(out.reg_tokens, tensor(f, "registers")) < kTolerance);
        if (f.has("pooled")) {
            std::vector<float> pooled;
            for (int b = 0; b < batch; ++b) {
                const auto p = out.pooled_of(b);
                pooled.insert(pooled.end(), p.begin(), p.end());
            }
            CHECK(relative_error(pooled, tensor(f, "pooled")) < kTolerance);
        }
        CHECK(out.embedding_dim == m.config().proj_dim);
        if (f.has("embedding")) CHECK(relative_error(out.embedding, tensor(f, "embedding")) < kTolerance);
    }
}

TEST_CASE("each family's parity, as the closing note reports it") {
    // max |got - want| / max |want| over cls, pooled, patches (and embedding), worst case per model.
    std::map<std::string, double> worst;
    for (const auto& c : parity_cases()) {
        if (c["config"].value("family", "dinov2") == "dinov2") continue;
        const Model m = Model::load(fixture(c["model"].get<std::string>()));
        const SafetensorsFile f(fixture(c["case"].get<std::string>()));
        const auto input = tensor(f, "input");
        const int batch = static_cast<int>(f.get("input").shape[0]);
        const Features out = m.forward(input.data(), batch, c["height"].get<int>(), c["width"].get<int>());
        std::vector<float> pooled;
        for (int b = 0; b < batch; ++b) {
            const auto p = out.pooled_of(b);
            pooled.insert(pooled.end(), p.begin(), p.end());
        }
        double e = std::max({relative_error(out.cls, tensor(f, "cls")), relative_error(out.patches, tensor(f, "patches")),
                             relative_error(pooled, tensor(f, "pooled"))});
        if (f.has("embedding")) e = std::max(e, relative_error(out.embedding, tensor(f, "embedding")));
        double& w = worst[c["model"].get<std::string>()];
        w = std::max(w, e);
    }
    REQUIRE(worst.size() >= 10);
    for (const auto& [model, e] : worst) {
        INFO(model << ": max relative error " << e);
        CHECK(e < kTolerance);
    }
}

TEST_CASE("thread count does not change the result, bit for bit") {
    for (const std::string model : {"models/dinov2_reg2_f16.safetensors", "models/sink_reg2_f32.safetensors",
                                    "models/hf_swiglu"}) {
        INFO(model);
        const Model m = Model::load(fixture(model));
        const SafetensorsFile f(fixture("cases/dinov2_f32_24x20.safetensors"));
        const auto input = tensor(f, "input");
        const Features one = m.forward(input.data(), 2, 24, 20, ForwardOptions{1});
        const Features two = m.forward(input.data(), 2, 24, 20, ForwardOptions{2});
        const Features all = m.forward(input.data(), 2, 24, 20, ForwardOptions{0});
        CHECK(one.patches == two.patches);
        CHECK(one.cls == two.cls);
        CHECK(one.reg_tokens == two.reg_tokens);
        CHECK(one.patches == all.patches);
        // Inside a caller's own arena (extract's pipeline), sharing its threads.
        Features shared;
        tbb::task_arena(2).execute([&] {
            ForwardOptions in_arena;
            in_arena.in_current_arena = true;
            shared = m.forward(input.data(), 2, 24, 20, in_arena);
        });
        CHECK(one.patches == shared.patches);
        CHECK(one.cls == shared.cls);
    }
}

TEST_CASE("reused workspaces change nothing: a forward after a larger one equals a fresh model's") {
    const std::string path = fixture("models/sink_reg2_f32.safetensors");
    const SafetensorsFile f(fixture("cases/dinov2_f32_24x20.safetensors"));
    const auto input = tensor(f, "input");
    const Features fresh = Model::load(path).forward(input.data(), 1, 24, 20);
    const Model m = Model::load(path);
    std::vector<float> large(static_cast<std::size_t>(3) * 3 * 56 * 56, 3.0f);
    m.forward(large.data(), 3, 56, 56);  // grows every buffer and leaves other values in them
    const Features after = m.forward(input.data(), 1, 24, 20);
    CHECK(after.patches == fresh.patches);
    CHECK(after.cls == fresh.cls);
    CHECK(after.reg_tokens == fresh.reg_tokens);
}

TEST_CASE("a batch gives each image what it gets alone") {
    const Model m = Model::load(fixture("models/timm_reg2_bf16.safetensors"));
    const SafetensorsFile f(fixture("cases/timm_reg2_bf16_12x28.safetensors"));
    const auto input = tensor(f, "input");
    const Features both = m.forward(input.data(), 2, 12, 28);
    const std::size_t plane = 3 * 12 * 28;
    for (int b = 0; b < 2; ++b) {
        INFO("image " << b);
        const Features alone = m.forward(input.data() + b * plane, 1, 12, 28);
        const std::vector<float> batched(both.patches_of(b), both.patches_of(b) + alone.patches.size());
        CHECK(relative_error(alone.patches, batched) < 1e-5);
        const std::vector<float> cls(both.cls_of(b), both.cls_of(b) + alone.cls.size());
        CHECK(relative_error(alone.cls, cls) < 1e-5);
    }
}

TEST_CASE("the wrong attention kind is detected by the fixtures") {
    // Guards the parity test itself: running softmax where softmax-1 was trained must fail it.
    const Model m = Model::load(fixture("models/softmax1_f32.safetensors"), ConfigOverrides{AttentionKind::Softmax, {}});
    CHECK(m.config().retrofit());
    const SafetensorsFile f(fixture("cases/softmax1_f32_12x28.safetensors"));
    const auto input = tensor(f, "input");
    const Features out = m.forward(input.data(), 2, 12, 28);
    CHECK(relative_error(out.patches, tensor(f, "patches")) > 1e-3);
}

TEST_CASE("forward rejects sizes that are not whole patches") {
    const Model m = Model::load(fixture("models/dinov2_f32.safetensors"));
    std::vector<float> px(3 * 18 * 16);
    CHECK_THROWS_WITH(m.forward(px.data(), 1, 18, 16), Catch::Contains("multiple of the patch size 4"));
}

TEST_CASE("one model shared by concurrent forwards gives each caller its own exact result") {
    // The model's workspaces and arenas are shared state: four threads, two input sizes and
    // two thread counts at once, each result checked bit for bit against a lone forward.
    const Model m = Model::load(fixture("models/dinov2_reg2_f16.safetensors"));
    const SafetensorsFile f(fixture("cases/dinov2_f32_24x20.safetensors"));
    const auto small = tensor(f, "input");
    std::vector<float> large(static_cast<std::size_t>(2) * 3 * 40 * 36);
    for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<float>(i % 97) / 50.0f - 1.0f;
    const Features want_small = m.forward(small.data(), 2, 24, 20, ForwardOptions{1});
    const Features want_large = m.forward(large.data(), 2, 40, 36, ForwardOptions{1});
    std::vector<Features> got(8);
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t)
        callers.emplace_back([&, t] {
            for (int k = 0; k < 2; ++k) {
                const bool is_large = (t + k) % 2 == 1;
                got[static_cast<std::size_t>(t * 2 + k)] =
                    is_large ? m.forward(large.data(), 2, 40, 36, ForwardOptions{1 + t % 2})
                             : m.forward(small.data(), 2, 24, 20, ForwardOptions{1 + t % 2});
            }
        });
    for (auto& c : callers) c.join();
    for (int t = 0; t < 4; ++t)
        for (int k = 0; k < 2; ++k) {
            const Features& want = (t + k) % 2 == 1 ? want_large : want_small;
            const Features& have = got[static_cast<std::size_t>(t * 2 + k)];
            CHECK(have.patches == want.patches);
            CHECK(have.cls == want.cls);
        }
}
