// Probes against the PyTorch reference's trace (tests/fixtures/traces): attention rows,
// abstention, key mass, residual-stream norms, kurtosis, MLP activations, rollout; and the
// planted-outlier checkpoint's artifacts found exactly.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <memory>
#include <numeric>

#include "test_support.hpp"
#include "vitreg/error.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/model.hpp"
#include "vitreg/analysis/query_attention.hpp"
#include "vitreg/analysis/rollout.hpp"
#include "vitreg/analysis/stats.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

nlohmann::json traces() { return fixture_json("traces.json"); }

Probe everything(int depth) {
    Probe p;
    p.norms = p.abstention = p.key_mass = p.all_queries = true;
    for (int l = 0; l < depth; ++l) {
        p.attention_layers.push_back(l);
        p.mlp_layers.push_back(l);
    }
    return p;
}

struct Traced {
    Model model;
    std::unique_ptr<SafetensorsFile> file;
    Trace trace;
    Features features;
};

Traced run_fixture(const nlohmann::json& c, const Probe* probe = nullptr) {
    Traced t{Model::load(fixture(c["model"].get<std::string>())),
             std::make_unique<SafetensorsFile>(fixture(c["file"].get<std::string>())), {}, {}};
    const auto input = tensor(*t.file, "input");
    const Probe p = probe ? *probe : everything(t.model.config().depth);
    t.features = t.model.forward(input.data(), 1, c["height"].get<int>(), c["width"].get<int>(), p, t.trace);
    return t;
}

}  // namespace

TEST_CASE("traces match the reference: attention, abstention, key mass, norms, kurtosis, MLP") {
    for (const auto& c : traces()) {
        INFO("trace " << c["name"].get<std::string>());
        const Traced r = run_fixture(c);
        const Trace& t = r.trace;
        CHECK(relative_error(r.features.patches, tensor(*r.file, "patches")) < 1e-4);
        // Layer-major [layers, heads, queries, tokens] equals the fixture's layout for batch 1.
        CHECK(relative_error(t.attention, tensor(*r.file, "attn")) < 1e-4);
        CHECK(relative_error(t.abstention, tensor(*r.file, "abstention")) < 1e-4);
        CHECK(relative_error(t.key_mass, tensor(*r.file, "key_mass")) < 1e-4);
        CHECK(relative_error(t.norms, tensor(*r.file, "norms")) < 1e-4);
        CHECK(relative_error(t.kurtosis, tensor(*r.file, "kurtosis")) < 1e-4);
        CHECK(relative_error(t.mlp, tensor(*r.file, "mlp_hidden")) < 1e-4);
        std::vector<float> inf(t.layers);
        for (int l = 0; l < t.layers; ++l) inf[l] = *std::max_element(t.max_abs_of(l, 0), t.max_abs_of(l, 0) + t.tokens);
        CHECK(relative_error(inf, tensor(*r.file, "inf_norm")) < 1e-4);

        // Rows sum to 1 for softmax, to 1 - abstention otherwise.
        double worst = 0;
        for (int l = 0; l < t.layers; ++l)
            for (int h = 0; h < t.heads; ++h)
                for (int q = 0; q < t.tokens; ++q) {
                    const float* row = t.attention_row(l, 0, h, q);
                    const double sum = std::accumulate(row, row + t.tokens, 0.0);
                    worst = std::max(worst, std::abs(sum + t.abstention_of(l, 0, h)[q] - 1.0));
                    if (c["attention"] == "softmax") CHECK(t.abstention_of(l, 0, h)[q] == 0.0f);
                }
        CHECK(worst < 1e-5);

        const auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
        CHECK(relative_error(as_float(rollout(t, 0, HeadFusion::Mean)), tensor(*r.file, "rollout_mean")) < 1e-4);
        CHECK(relative_error(as_float(rollout(t, 0, HeadFusion::Max, 0.5f)), tensor(*r.file, "rollout_max_d50")) < 1e-4);
        CHECK(relative_error(as_float(rollout(t, 0, HeadFusion::Min)), tensor(*r.file, "rollout_min")) < 1e-4);
    }
}

TEST_CASE("recording CLS rows only copies those rows, and they equal the full matrix's") {
    const auto c = traces()[2];  // sink with registers
    const Traced full = run_fixture(c);
    Probe cls_only;
    cls_only.attention_layers = {0, 1};
    cls_only.queries = {0, 3};
    const Traced part = run_fixture(c, &cls_only);
    const Trace& t = part.trace;
    CHECK(t.attention.size() == static_cast<std::size_t>(2 * t.heads * 2 * t.tokens));  // no N×N
    CHECK(t.norms.empty());
    CHECK(t.key_mass.empty());
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < t.heads; ++h)
            for (int q : {0, 3}) {
                const float* a = t.attention_row(l, 0, h, t.query_slot(q));
                const float* b = full.trace.attention_row(l, 0, h, q);
                CHECK(std::vector<float>(a, a + t.tokens) == std::vector<float>(b, b + t.tokens));
            }
    // A probe changes nothing in the features.
    CHECK(part.features.patches == full.features.patches);
    Probe bad;
    bad.attention_layers = {2};
    CHECK_THROWS_WITH(run_fixture(c, &bad), Catch::Contains("attention layer 2 is out of range"));
}

TEST_CASE("the planted neuron's tokens, and only they, are the artifacts") {
    const auto all = traces();
    const auto c = *std::find_if(all.begin(), all.end(), [](const nlohmann::json& j) { return j["name"] == "planted"; });
    Probe p = Probe::statistics(4);
    const Traced r = run_fixture(c, &p);
    const ImageStats s = image_stats(r.trace, 0, ArtifactRules{c["threshold"].get<float>(), ArtifactRule{}, 0.3f});
    const std::vector<int> planted = c["artifacts"].get<std::vector<int>>();
    CHECK(s.layers[0].artifacts_abs == 0);
    // Before the neuron fires, the planted tokens already stand out a little (their position
    // embedding carries the trigger channel): the model-free rule may flag them, nothing else.
    for (int k : s.layers[0].artifact_tokens_robust) CHECK(std::count(planted.begin(), planted.end(), k) == 1);
    for (int l = 1; l < 4; ++l) {
        INFO("layer " << l);
        CHECK(s.layers[l].artifact_tokens_abs == planted);
        CHECK(s.layers[l].artifact_tokens_robust == planted);
        CHECK(s.layers[l].artifacts_abs == 3);
        CHECK(s.layers[l].artifact_fraction_abs == Approx(3.0 / 16));
        CHECK(s.layers[l].norm_max > 390);
        CHECK(s.layers[l].norm_median < 10);
    }
}

TEST_CASE("rollout by hand: 3 tokens, rows renormalized after adding the identity") {
    // A = [[.5,.3,.2],[.1,.8,.1],[.2,.2,.6]] → (A+I) row-normalized.
    const std::vector<float> a{.5f, .3f, .2f, .1f, .8f, .1f, .2f, .2f, .6f};
    const auto one = rollout({a}, 3, 0.0f);
    const double want[9] = {.75, .15, .1, .05, .9, .05, .1, .1, .8};
    for (int i = 0; i < 9; ++i) CHECK(one[i] == Approx(want[i]).margin(1e-7));
    // Two layers: Â·Â.
    const auto two = rollout({a, a}, 3, 0.0f);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            double e = 0;
            for (int k = 0; k < 3; ++k) e += want[i * 3 + k] * want[k * 3 + j];
            CHECK(two[i * 3 + j] == Approx(e).margin(1e-7));
        }
    // Discard 1/3 (3 of 9 smallest: .1, .1, .2 at [1,0],[1,2],[0,2]) then renormalize.
    const auto d = rollout({a}, 3, 1.0f / 3);
    CHECK(d[1 * 3 + 0] == 0.0);
    CHECK(d[1 * 3 + 2] == 0.0);
    CHECK(d[0 * 3 + 1] == Approx(.3 / 1.8).margin(1e-7));
    CHECK(d[1 * 3 + 1] == Approx(1.0).margin(1e-7));
}

TEST_CASE("head fusion: mean, max, min") {
    const std::vector<float> rows{0.1f, 0.9f, 0.0f, 0.5f, 0.3f, 0.2f};  // 2 heads × 3 keys
    CHECK(fuse_heads(rows.data(), 2, 3, HeadFusion::Mean) == std::vector<float>{0.3f, 0.6f, 0.1f});
    CHECK(fuse_heads(rows.data(), 2, 3, HeadFusion::Max) == std::vector<float>{0.5f, 0.9f, 0.2f});
    CHECK(fuse_heads(rows.data(), 2, 3, HeadFusion::Min) == std::vector<float>{0.1f, 0.3f, 0.0f});
    CHECK_THROWS(parse_head_fusion("median"));
}

TEST_CASE("token names resolve to indices and refuse what is not there") {
    CHECK(TokenRef::parse("cls").token_index(4, 16, 16) == 0);
    CHECK(TokenRef::parse("reg:3").token_index(4, 16, 16) == 4);
    CHECK(TokenRef::parse("patch:1,2").token_index(4, 16, 16) == 1 + 4 + 16 + 2);
    CHECK_THROWS_WITH(TokenRef::parse("reg:4").token_index(4, 16, 16), Catch::Contains("4 registers"));
    CHECK_THROWS_WITH(TokenRef::parse("patch:16,0").token_index(4, 16, 16), Catch::Contains("outside the 16x16"));
    CHECK_THROWS_AS(TokenRef::parse("patch:1"), UsageError);
    CHECK_THROWS_AS(TokenRef::parse("query"), UsageError);
}

TEST_CASE("any query's rows recomputed from recorded q and k equal the forward's: as trained, bf16, evicted") {
    for (const auto& c : traces()) {
        const Model trained = Model::load(fixture(c["model"].get<std::string>()));
        PrecisionOptions bf16;
        bf16.precision = Precision::Bf16;
        Intervention evict;
        evict.evict = Eviction::parse("sink,patch:0,1");
        const std::pair<const char*, Model> variants[] = {
            {"trained", trained},
            {"bf16", Model::load(fixture(c["model"].get<std::string>()), {}, bf16)},
            {"evict=sink,patch:0,1", trained.with(evict)}};
        for (const auto& [name, m] : variants) {
            INFO("trace " << c["name"].get<std::string>() << ", " << name);
            Probe p = everything(m.config().depth);
            p.qkv_layers = resolve_layers("all", m.config().depth);
            Traced r{m, std::make_unique<SafetensorsFile>(fixture(c["file"].get<std::string>())), {}, {}};
            const auto input = tensor(*r.file, "input");
            r.features = m.forward(input.data(), 1, c["height"].get<int>(), c["width"].get<int>(), p, r.trace);
            const Trace& t = r.trace;
            CHECK(t.evicted.empty() == !m.intervention().evict.any());
            std::vector<std::vector<float>> fused(t.layers);
            for (int layer = 0; layer < t.layers; ++layer) {
                for (int q : {0, t.tokens / 2, t.tokens - 1}) {
                    const QueryAttention a = query_attention(m, t, layer, 0, q);
                    for (int h = 0; h < t.heads; ++h) {
                        const float* want = t.attention_row(layer, 0, h, q);
                        const std::vector<float> got(a.rows.begin() + h * t.tokens, a.rows.begin() + (h + 1) * t.tokens);
                        CHECK(relative_error(got, std::vector<float>(want, want + t.tokens)) < 1e-5);
                        CHECK(a.abstention[h] == Approx(t.abstention_of(layer, 0, h)[q]).margin(1e-6));
                    }
                }
                // Every query at once, heads fused by their mean.
                fused[layer] = mean_attention(m, t, layer, 0);
                std::vector<float> want;
                for (int q = 0; q < t.tokens; ++q) {
                    const auto f = fuse_heads(t.query_rows(layer, 0, q).data(), t.heads, t.tokens, HeadFusion::Mean);
                    want.insert(want.end(), f.begin(), f.end());
                }
                CHECK(relative_error(fused[layer], want) < 1e-5);
            }
            // Rollout rows of some queries equal those rows of the whole rollout.
            const std::vector<int> queries{t.tokens - 1, 0, t.tokens / 2};
            const auto rows = rollout_rows(fused, t.tokens, queries);
            const auto whole = rollout(t, 0, HeadFusion::Mean);
            for (std::size_t i = 0; i < queries.size(); ++i) {
                const auto* w = whole.data() + static_cast<std::size_t>(queries[i]) * t.tokens;
                CHECK(relative_error(std::vector<float>(rows.begin() + i * t.tokens, rows.begin() + (i + 1) * t.tokens),
                                     std::vector<float>(w, w + t.tokens)) < 1e-5);
            }
        }
    }
}

TEST_CASE("the profile names where the forward's time went and changes nothing it computes") {
    const auto c = traces()[0];
    Probe timed;
    timed.profile = true;
    const Traced r = run_fixture(c, &timed);
    const ForwardProfile& p = r.trace.profile;
    double named = 0;
    for (int stage = 0; stage < ForwardProfile::kStages; ++stage) {
        INFO(ForwardProfile::name(stage));
        CHECK(p.seconds[stage] >= 0.0);
        if (stage != ForwardProfile::Other) named += p.seconds[stage];
    }
    for (const auto stage : {ForwardProfile::Qkv, ForwardProfile::Attention, ForwardProfile::Proj, ForwardProfile::Fc1,
                             ForwardProfile::Fc2, ForwardProfile::Norms, ForwardProfile::Embed})
        CHECK(p.seconds[stage] > 0.0);
    CHECK(p.seconds[ForwardProfile::MlpActivation] == 0.0);  // a GELU MLP: fused into fc1
    CHECK(p.total >= named);
    CHECK(p.seconds[ForwardProfile::Other] == Approx(p.total - named).margin(1e-12));
    CHECK(std::string(ForwardProfile::name(ForwardProfile::Fc2)) == "fc2");
    CHECK_THROWS_AS(ForwardProfile::name(ForwardProfile::kStages), UsageError);

    const Probe nothing;
    const Traced plain = run_fixture(c, &nothing);
    CHECK(plain.trace.profile.total == 0.0);
    CHECK(plain.features.patches == r.features.patches);  // the clock reads change no bit
    CHECK(plain.features.cls == r.features.cls);
}
