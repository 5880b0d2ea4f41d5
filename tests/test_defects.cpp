// Defect directions (vitreg defects) against the PyTorch reference (tests/reference/
// defects_reference.py, fixtures from tests/fixtures/make_defects.py), the planted-direction
// model, and the artifact rule's direction test on that model's planted patches.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "vitreg/analysis/artifact_rule.hpp"
#include "vitreg/analysis/defects.hpp"
#include "vitreg/analysis/stats.hpp"
#include "vitreg/analysis/study.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"

using namespace vitreg;
using vitreg::test::fixture;

namespace {

double abs_cosine(const float* a, const float* b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; ++i) {
        ab += static_cast<double>(a[i]) * b[i];
        aa += static_cast<double>(a[i]) * a[i];
        bb += static_cast<double>(b[i]) * b[i];
    }
    return std::fabs(ab) / std::sqrt(aa * bb);
}

struct Expected {
    std::vector<float> directions, singular_values;
    int layers = 0, dim = 0, top = 0;
    DefectOptions options;
};

Expected expected(const std::string& name) {
    SafetensorsFile f(fixture("defects/" + name + ".defects.safetensors"));
    Expected e;
    e.directions = f.get("directions").to_float();
    e.singular_values = f.get("singular_values").to_float();
    e.layers = static_cast<int>(f.get("directions").shape[0]);
    e.dim = static_cast<int>(f.get("directions").shape[1]);
    e.top = static_cast<int>(f.get("singular_values").shape[1]);
    e.options.samples = std::stoi(f.metadata().at("samples"));
    e.options.seed = std::stoull(f.metadata().at("seed"));
    e.options.top = e.top;
    return e;
}

const std::string kPlanted = "defects/planted_direction_f16.safetensors";

// A smooth side×side image: a diagonal ramp per channel (normalized pixels in about [-1, 1]),
// shifted by `offset`.
std::vector<float> ramp(int side, float offset = 0.0f) {
    std::vector<float> pixels(3 * side * side);
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < side; ++y)
            for (int x = 0; x < side; ++x)
                pixels[(static_cast<std::size_t>(c) * side + y) * side + x] = (x + y) / float(side) - 1.0f + 0.1f * c + offset;
    return pixels;
}

std::vector<int> planted_tokens() {
    SafetensorsFile planted(fixture("defects/planted_direction.safetensors"));
    std::vector<int> tokens;
    for (float t : planted.get("tokens").to_float()) tokens.push_back(static_cast<int>(t));
    return tokens;
}

}  // namespace

TEST_CASE("defect directions match the PyTorch reference for every MLP kind", "[defects]") {
    const std::vector<std::pair<std::string, std::string>> models = {
        {"dinov2_f32", "models/dinov2_f32.safetensors"},
        {"open_clip_quickgelu", "models/open_clip_quickgelu"},
        {"hf_siglip", "models/hf_siglip"},
        {"dinov2_swiglu_f32", "models/dinov2_swiglu_f32.safetensors"},
        {"planted", kPlanted}};
    std::vector<MlpKind> kinds;
    for (const auto& [name, path] : models) {
        INFO(name);
        const Expected e = expected(name);
        const Checkpoint ck(fixture(path));
        kinds.push_back(ck.config().mlp);
        const DefectDirections d = defect_directions(ck, e.options);
        REQUIRE(d.layers == e.layers);
        REQUIRE(d.dim == e.dim);
        REQUIRE(d.top == e.top);
        for (int l = 0; l < d.layers; ++l) {
            INFO("layer " << l);
            CHECK(abs_cosine(d.direction(l), e.directions.data() + static_cast<std::size_t>(l) * e.dim, e.dim) >= 0.9999);
            for (int k = 0; k < d.top; ++k) {
                const float want = e.singular_values[static_cast<std::size_t>(l) * e.top + k];
                CHECK(std::fabs(d.singular_value(l, k) - want) <= 1e-4 * want);
            }
        }
    }
    // The fixtures cover every activation the forward knows.
    for (MlpKind kind : {MlpKind::Gelu, MlpKind::QuickGelu, MlpKind::GeluTanh, MlpKind::SwiGlu})
        CHECK(std::find(kinds.begin(), kinds.end(), kind) != kinds.end());
}

TEST_CASE("the planted direction is what vitreg defects finds", "[defects]") {
    SafetensorsFile planted(fixture("defects/planted_direction.safetensors"));
    const std::vector<float> v = planted.get("direction").to_float();
    const DefectDirections d = defect_directions(Checkpoint(fixture(kPlanted)));  // the default sample
    for (int l = 0; l < d.layers; ++l) {
        INFO("layer " << l);
        CHECK(abs_cosine(d.direction(l), v.data(), d.dim) >= 0.99);
        // One large singular value: the planted one stands far above the next.
        CHECK(d.singular_value(l, 0) > 10 * d.singular_value(l, 1));
    }
    // Another seed moves the fit, not the direction.
    DefectOptions other;
    other.seed = 12345;
    other.samples = 2048;
    const DefectDirections e = defect_directions(Checkpoint(fixture(kPlanted)), other);
    CHECK(abs_cosine(e.direction(d.layers - 1), d.direction(d.layers - 1), d.dim) >= 0.999);
    CHECK(e.fit_description() == "2048-sample least-squares fit, seed 12345");
}

TEST_CASE("defects files round-trip and bad ones are refused by name", "[defects]") {
    vitreg::test::TempDir tmp;
    DefectOptions small;
    small.samples = 512;
    const DefectDirections d = defect_directions(Checkpoint(fixture("models/dinov2_f32.safetensors")), small);
    write_defects(d, tmp / "out");
    const DefectDirections back = read_defects(tmp / "out");
    CHECK(back.layers == d.layers);
    CHECK(back.dim == d.dim);
    CHECK(back.samples == 512);
    CHECK(back.directions == d.directions);
    CHECK(back.singular_values == d.singular_values);
    CHECK(vitreg::test::read_bytes(tmp / "out/defects.json").find("\"fit\"") != std::string::npos);
    CHECK_THROWS_WITH(read_defects(fixture("models/dinov2_f32.safetensors")),
                      Catch::Contains("not a defects file") && Catch::Contains("directions"));
    CHECK_THROWS_WITH(check_defects_fit(d, d.layers + 1, d.dim, "x.safetensors"),
                      Catch::Contains("x.safetensors") && Catch::Contains("layers"));
    small.samples = 0;
    CHECK_THROWS_AS(defect_directions(Checkpoint(fixture("models/dinov2_f32.safetensors")), small), UsageError);
}

TEST_CASE("the direction rule flags the planted patches", "[defects]") {
    const std::vector<int> tokens = planted_tokens();
    const Model m = Model::load(fixture(kPlanted));
    const int side = m.config().grid * m.config().patch;
    const std::vector<float> pixels = ramp(side);
    for (const ArtifactTest test : {ArtifactTest::Direction, ArtifactTest::Both, ArtifactTest::Norm}) {
        INFO(name_of(test));
        ArtifactRule rule;
        rule.test = test;
        rule = rule.for_model(m);
        Probe probe;
        rule.ask(probe);
        Trace t;
        m.forward(pixels.data(), 1, side, side, probe, t);
        CHECK(rule.flag(t, 0, t.layers - 1) == tokens);
        ArtifactRules rules;
        rules.rule = rule;
        CHECK(layer_stats(t, 0, t.layers - 1, rules).artifact_tokens_flagged == tokens);
        if (test != ArtifactTest::Norm) CHECK(rule.to_json()["directions"] == "computed from the model's weights");
    }
    ArtifactRule unready;
    unready.test = ArtifactTest::Direction;
    Probe probe;
    CHECK_THROWS_AS(unready.ask(probe), UsageError);
}

TEST_CASE("the study's defect row: the planted patches lie along u", "[defects][study]") {
    const int side = 16, patches = 16;
    StudyImages images;
    images.names = {"ramp0", "ramp1"};
    images.load = [side](std::size_t i, const ResizeSpec&, const Config&) {
        Pixels px;
        px.width = px.height = side;
        px.chw = ramp(side, 0.2f * static_cast<float>(i));
        return px;
    };
    StudyConfig config = StudyConfig::parse(fixture(kPlanted));
    StudyOptions o;
    o.resize = ResizeSpec::parse("16x16");
    o.timing_images = 0;
    const auto study = run_study({config}, images, o);
    const auto& row = study["configs"][0]["defects"];
    REQUIRE(row["images"].size() == 2);
    const double share = static_cast<double>(planted_tokens().size()) / patches;
    for (const auto& image : row["images"]) {
        CHECK(image["top_angle_deg"].get<double>() < 5.0);  // the highest-norm patch is a planted one, along u
        CHECK(image["flagged_direction"].get<double>() == Approx(share));
        CHECK(image["flagged_both"].get<double>() == Approx(share));
    }
    const auto& summary = study["configs"][0]["summary"];
    CHECK(summary["defect_flagged_direction"].get<double>() == Approx(share));
    CHECK(summary["defect_top_angle_deg"].get<double>() < 5.0);
    CHECK(study["configs"][0]["artifact_rule"]["rule"] == "norm");
    CHECK(study_csv(study).find("defect_top_angle_deg") != std::string::npos);
}
