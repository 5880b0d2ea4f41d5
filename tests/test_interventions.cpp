// Interventions (docs/design.md, "Interventions and the study") against the PyTorch reference
// extended with each of them (tests/reference/vit_reference.py, Intervention; fixtures in
// interventions.json): key eviction, sink calibration and test-time registers.
#include <catch2/catch.hpp>
#include <algorithm>

#include "test_support.hpp"
#include "vitreg/error.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/model.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/analysis/register_neurons.hpp"
#include "vitreg/analysis/sink_calibration.hpp"
#include "vitreg/analysis/stats.hpp"
#include "vitreg/writers.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {


std::vector<nlohmann::json> cases(const std::string& kind) {
    std::vector<nlohmann::json> out;
    for (const auto& c : fixture_json("interventions.json"))
        if (c["kind"] == kind) out.push_back(c);
    return out;
}

// The outputs of the edited forward against the reference's.
void check_outputs(const Features& got, const SafetensorsFile& f) {
    CHECK(relative_error(got.cls, tensor(f, "cls")) < kParityTolerance);
    CHECK(relative_error(got.patches, tensor(f, "patches")) < kParityTolerance);
    if (f.has("registers")) CHECK(relative_error(got.reg_tokens, tensor(f, "registers")) < kParityTolerance);
}

// The reference stores [batch, layers, rest...]; a Trace is layer-major [layers, batch, rest...].
std::vector<float> layer_major(const std::vector<float>& v, int batch, int layers) {
    const std::size_t rest = v.size() / (static_cast<std::size_t>(batch) * layers);
    std::vector<float> out(v.size());
    for (int b = 0; b < batch; ++b)
        for (int l = 0; l < layers; ++l)
            std::copy_n(v.begin() + static_cast<std::ptrdiff_t>((static_cast<std::size_t>(b) * layers + l) * rest), rest,
                        out.begin() + static_cast<std::ptrdiff_t>((static_cast<std::size_t>(l) * batch + b) * rest));
    return out;
}

Probe norms_probe() {
    Probe p;
    p.norms = true;
    return p;
}

}  // namespace

TEST_CASE("evicting keys matches the reference for softmax, softmax-1 and sink models, DINOv3 (RoPE) and SigLIP") {
    const auto all = cases("evict");
    REQUIRE(all.size() == 16);
    for (const auto& c : all) {
        INFO(c["name"].get<std::string>());
        const SafetensorsFile f(fixture(c["file"].get<std::string>()));
        const auto input = tensor(f, "input");
        const int B = c["batch"], h = c["height"], w = c["width"];
        Intervention edit;
        edit.evict = Eviction::parse(c["evict"].get<std::string>());
        const Model plain = Model::load(fixture(c["model"].get<std::string>()));
        const Model m = plain.with(edit);
        Probe probe = norms_probe();
        probe.key_mass = true;
        Trace t;
        check_outputs(m.forward(input.data(), B, h, w, probe, t, ForwardOptions{2}), f);
        CHECK(relative_error(t.norms, layer_major(tensor(f, "norms"), B, t.layers)) < kParityTolerance);
        // The keys resolved from the first forward are the reference's, and nothing attends to them.
        Probe first;
        first.key_mass = true;
        first.norms = true;
        Trace t0;
        plain.forward(input.data(), B, h, w, first, t0);
        const auto mask = eviction_mask(edit.evict, t0, plain.config().attention);
        const auto want = layer_major(tensor(f, "evicted"), B, t.layers);
        REQUIRE(mask.size() == want.size());
        CHECK(std::equal(mask.begin(), mask.end(), want.begin(), [](std::uint8_t a, float b) { return a == b; }));
        for (std::size_t i = 0; i < mask.size(); ++i)
            if (mask[i]) REQUIRE(t.key_mass[i] == 0.0f);
        // Any thread count gives the same numbers.
        const Features one = m.forward(input.data(), B, h, w, ForwardOptions{1});
        CHECK(one.cls == m.forward(input.data(), B, h, w, ForwardOptions{2}).cls);
    }
}

TEST_CASE("evicting the planted model's artifacts finds exactly the planted tokens") {
    const auto c = cases("evict");
    const auto it = std::find_if(c.begin(), c.end(), [](const auto& e) { return e["name"] == "evict_planted_artifacts"; });
    REQUIRE(it != c.end());
    const SafetensorsFile f(fixture((*it)["file"].get<std::string>()));
    const auto input = tensor(f, "input");
    const Model m = Model::load(fixture((*it)["model"].get<std::string>()));
    Trace t;
    m.forward(input.data(), 1, 16, 16, norms_probe(), t);
    const auto tokens = layer_stats(t, 0, t.layers - 1).artifact_tokens_robust;
    CHECK(tokens == std::vector<int>{2, 11, 13});
}

TEST_CASE("eviction specs parse, print back and refuse what cannot work") {
    const Eviction e = Eviction::parse("sink,patch:1,2,cls,registers,reg:0");
    CHECK(e.sink);
    CHECK(e.registers);
    CHECK_FALSE(e.artifacts);
    REQUIRE(e.tokens.size() == 3);
    CHECK(e.tokens[0].to_string() == "patch:1,2");
    CHECK(Eviction::parse(e.to_string()).to_string() == e.to_string());
    CHECK(Eviction::parse("none").to_string() == "none");
    CHECK_THROWS_WITH(Eviction::parse("sinks"), Catch::Contains("unknown entry 'sinks'"));
    CHECK_THROWS_AS(Eviction::parse("patch:1"), UsageError);

    // A softmax head left with no key is refused; softmax-1 may abstain entirely.
    Trace t;
    t.layers = 1;
    t.batch = 1;
    t.heads = 1;
    t.tokens = 3;
    t.registers = 0;
    t.grid_h = 1;
    t.grid_w = 2;
    const Eviction everything = Eviction::parse("cls,patch:0,0,patch:0,1");
    CHECK_THROWS_WITH(eviction_mask(everything, t, AttentionKind::Softmax), Catch::Contains("softmax must attend somewhere"));
    CHECK(eviction_mask(everything, t, AttentionKind::Softmax1) == std::vector<std::uint8_t>{1, 1, 1});
    CHECK_THROWS_WITH(eviction_mask(Eviction::parse("patch:3,0"), t, AttentionKind::Softmax), Catch::Contains("outside"));
}

TEST_CASE("interventions named on a model spec and on a model") {
    const ModelSpec s = ModelSpec::parse("m.safetensors@softmax1@evict=sink,patch:1,2@ttr=2:1:21,0:3");
    CHECK(s.model == "m.safetensors");
    REQUIRE(s.intervention);
    CHECK(s.intervention->evict.to_string() == "sink,patch:1,2");
    CHECK(s.intervention->test_time_registers == 2);
    CHECK(to_string(s.intervention->register_neurons) == "1:21,0:3");
    CHECK(ModelSpec::parse(s.to_string()).to_string() == s.to_string());
    CHECK_THROWS_WITH(ModelSpec::parse("m@ttr=x"), Catch::Contains("@ttr=K:NEURONS"));

    const Model m = Model::load(fixture("models/planted_f32.safetensors"));
    Intervention edit;
    edit.test_time_registers = 1;
    CHECK_THROWS_WITH(m.with(edit), Catch::Contains("--ttr needs --register-neurons"));
    edit.register_neurons = {{4, 0}};
    CHECK_THROWS_WITH(m.with(edit), Catch::Contains("outside the model"));
    edit.register_neurons = {{1, 21}};
    const Model ttr = m.with(edit);
    CHECK(ttr.registers() == 1);
    CHECK(ttr.tokens(16, 16) == m.tokens(16, 16) + 1);
    CHECK(ttr.intervention().to_string() == "ttr=1 neurons=1:21");
    CHECK(m.intervention().empty());  // the original is unchanged; the weights are shared
}

TEST_CASE("sink calibration fits the reference's logits, and the written checkpoint runs them") {
    for (const auto& c : cases("calibrate")) {
        INFO(c["name"].get<std::string>());
        const SafetensorsFile f(fixture(c["file"].get<std::string>()));
        const auto images = tensor(f, "calibration_images");
        const Model m = Model::load(fixture(c["model"].get<std::string>()));
        const Config& cfg = m.config();
        SinkCalibrator calibrator(cfg.depth, cfg.heads, cfg.head_dim);
        const std::size_t image_size = 3 * 16 * 16;
        for (int i = 0; i < 3; ++i) {
            Trace t;
            m.forward(images.data() + i * image_size, 1, 16, 16, sink_calibration_probe(cfg.depth), t);
            calibrator.observe(t);
        }
        SinkCalibration cal = calibrator.finish();
        const auto want = tensor(f, "sinks"), mass = tensor(f, "target_mass");
        REQUIRE(cal.sinks.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
            CHECK(cal.sinks[i] == Approx(want[i]).margin(kParityTolerance));
            CHECK(cal.target_mass[i] == Approx(mass[i]).margin(1e-6));
        }

        TempDir dir;
        cal.source = m.path();
        cal.images = {"a.png", "b.png", "c.png"};
        for (const bool evict : {false, true}) {
            const std::string out = dir / (evict ? "evicted.safetensors" : "sink.safetensors");
            write_sink_checkpoint(m, cal, evict, out);
            const Model s = Model::load(out);
            CHECK(s.config().attention == AttentionKind::Sink);
            CHECK(s.config().trained_attention == AttentionKind::Sink);
            CHECK(s.intervention().evict.sink == evict);
            CHECK(s.config().pos_interp == cfg.pos_interp);
            CHECK(s.sink_logits(1) == std::vector<float>(cal.sinks.begin() + cfg.heads, cal.sinks.begin() + 2 * cfg.heads));
            const auto meta = SafetensorsFile(out).metadata();
            CHECK(meta.at("calibration_images") == R"(["a.png","b.png","c.png"])");
            CHECK(meta.at("source") == m.path());
            CHECK(meta.at("sink_calibration").find("bisection") != std::string::npos);
            const Features got = s.forward(images.data(), 3, 16, 16);
            const std::string key = evict ? "calibrated_evicted_" : "calibrated_";
            CHECK(relative_error(got.cls, tensor(f, key + "cls")) < kParityTolerance);
            CHECK(relative_error(got.patches, tensor(f, key + "patches")) < kParityTolerance);
        }
    }
}

TEST_CASE("find-register-neurons ranks the planted neuron first, with the reference's scores") {
    const auto c = cases("scores").at(0);
    const SafetensorsFile f(fixture(c["file"].get<std::string>()));
    const auto input = tensor(f, "input");
    const Model m = Model::load(fixture(c["model"].get<std::string>()));
    RegisterNeuronFinder finder(m.config().depth, m.config().mlp_hidden);
    Trace t;
    m.forward(input.data(), 1, 16, 16, register_neuron_probe(m.config().depth), t);
    REQUIRE(finder.observe(t, 0));
    const RegisterNeuronRanking r = finder.finish();
    CHECK(r.ranked.at(0).layer == c["top"][0].get<int>());
    CHECK(r.ranked.at(0).neuron == c["top"][1].get<int>());
    CHECK(r.selected == std::vector<RegisterNeuron>{{1, 21}});
    const auto scores = tensor(f, "scores");  // [layers, hidden]
    for (const auto& s : r.ranked)
        CHECK(s.score == Approx(scores[static_cast<std::size_t>(s.layer) * m.config().mlp_hidden + s.neuron]).margin(1e-5));

    TempDir dir;
    write_register_neurons(dir / "neurons.json", r);
    CHECK(parse_register_neurons(dir / "neurons.json") == r.selected);
    CHECK(parse_register_neurons(dir / "neurons.json:3").size() == 3);
    write_bytes(dir / "bad.json", R"({"format": "vitreg-register-neurons", "version": 9})");
    CHECK_THROWS_WITH(parse_register_neurons(dir / "bad.json"), Catch::Contains("unsupported \"version\""));
    // Found by fuzz/: a layer of 1e30 was cast to int (undefined behaviour); indices are whole and bounded.
    for (const char* layer : {"1e30", "1.5", "-1", "1048577"}) {
        write_bytes(dir / "bad.json", std::string(R"({"format": "vitreg-register-neurons", "version": 1, "ranked": [{"layer": )") +
                                          layer + R"(, "neuron": 2, "score": 1}], "selected": [[1, 2]]})");
        CHECK_THROWS_WITH(parse_register_neurons(dir / "bad.json"),
                          Catch::Contains("bad.json") && Catch::Contains("a layer is not an integer in 0..1048576"));
    }
}

TEST_CASE("test-time registers take the planted outliers' norm off the patches, as the reference does") {
    const auto all = cases("ttr");
    REQUIRE(all.size() == 5);  // the planted model's, DINOv3's and SigLIP's
    for (const auto& c : all) {
        INFO(c["name"].get<std::string>());
        const SafetensorsFile f(fixture(c["file"].get<std::string>()));
        const auto input = tensor(f, "input");
        const int B = c["batch"], h = c["height"], w = c["width"], K = c["ttr"];
        Intervention edit;
        edit.test_time_registers = K;
        for (const auto& n : c["neurons"]) edit.register_neurons.push_back({n[0].get<int>(), n[1].get<int>()});
        const Model plain = Model::load(fixture(c["model"].get<std::string>()));
        const Model m = plain.with(edit);
        Trace t;
        const Features out = m.forward(input.data(), B, h, w, norms_probe(), t, ForwardOptions{2});
        check_outputs(out, f);
        CHECK(relative_error(t.norms, layer_major(tensor(f, "norms"), B, t.layers)) < kParityTolerance);
        CHECK(out.registers == c["registers"].get<int>() + K);
        CHECK(out.test_time_registers == K);
        CHECK(t.test_time_registers == K);
        if (c["model"] != "models/planted_f32.safetensors") continue;

        // The planted patches (tokens 2, 11, 13 without test-time registers) were outliers; now
        // they sit at their neighbours' level and the test-time registers carry the high norm.
        Trace before;
        plain.forward(input.data(), 1, h, w, norms_probe(), before);
        const int last = t.layers - 1;
        const float* n0 = before.norms_of(last, 0);
        const float* n1 = t.norms_of(last, 0);
        std::vector<float> others;
        for (int p = 0; p < 16; ++p)
            if (p != 1 && p != 10 && p != 12) others.push_back(n1[t.patch_offset() + p]);
        std::nth_element(others.begin(), others.begin() + 6, others.end());
        const float median = 0.5f * (others[6] + *std::max_element(others.begin(), others.begin() + 6));
        for (int p : {1, 10, 12}) {
            CHECK(n0[1 + p] > 150.0f);
            CHECK(n1[t.patch_offset() + p] < 2.0f * median);
        }
        for (int r = 0; r < K; ++r) CHECK(n1[1 + r] > 150.0f);
    }
}
