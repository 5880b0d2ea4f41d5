// Defect directions (vitreg defects) against the PyTorch reference (tests/reference/
// defects_reference.py, fixtures from tests/fixtures/make_defects.py), the planted-direction
// model, the artifact rule's direction test on that model's planted patches, and the three rules
// on fashion-canvas-like images where the norm rule misfires on the garments.
#include <catch2/catch.hpp>
#include <algorithm>
#include <iterator>
#include <map>
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
#include "vitreg/image.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/preprocess.hpp"

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

const std::string kPlantedDirection = "defects/planted_direction_f16.safetensors";

// A model with its ModelSpec suffixes (repairs), as every front end opens one.
Model open_spec(const std::string& spec) { return open_model(ModelRequest::from_spec(ModelSpec::parse(spec))); }

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


}  // namespace

TEST_CASE("defect directions match the PyTorch reference for every MLP kind", "[defects]") {
    const std::vector<std::pair<std::string, std::string>> models = {
        {"dinov2_f32", "models/dinov2_f32.safetensors"},
        {"open_clip_quickgelu", "models/open_clip_quickgelu"},
        {"hf_siglip", "models/hf_siglip"},
        {"dinov2_swiglu_f32", "models/dinov2_swiglu_f32.safetensors"},
        {"planted", kPlantedDirection}};
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
    const DefectDirections d = defect_directions(Checkpoint(fixture(kPlantedDirection)));  // the default sample
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
    const DefectDirections e = defect_directions(Checkpoint(fixture(kPlantedDirection)), other);
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

TEST_CASE("the forward records each token's |cos| with its layer's direction", "[defects]") {
    const Model m = Model::load(fixture("models/dinov2_f32.safetensors"));
    DefectOptions small;
    small.samples = 1024;
    ArtifactRule rule;
    rule.test = ArtifactTest::Both;
    rule.fit = small;
    rule = rule.for_model(m);
    Probe probe;
    rule.ask(probe);
    for (int l = 0; l < m.config().depth; ++l) probe.block_layers.push_back(l);
    const int side = m.config().grid * m.config().patch;
    const std::vector<float> pixels = ramp(side);
    Trace t;
    m.forward(pixels.data(), 1, side, side, probe, t);
    REQUIRE(t.direction_cos.size() == static_cast<std::size_t>(t.layers) * t.tokens);
    for (int l = 0; l < t.layers; ++l)
        for (int k = 0; k < t.tokens; ++k) {
            const float* x = t.block_of(l, 0) + static_cast<std::size_t>(k) * t.dim;
            CHECK(t.direction_cos_of(l, 0)[k] == Approx(abs_cosine(x, rule.defects->direction(l), t.dim)).margin(1e-6));
        }
    Probe wrong;
    wrong.directions.assign(7, 1.0f);
    CHECK_THROWS_AS(m.forward(pixels.data(), 1, side, side, wrong, t), UsageError);
}

TEST_CASE("the artifact rule's three tests on a trace with known values", "[defects]") {
    // 16 patches (CLS first): patches 3 and 9 have outlying norms, patches 9 and 12 outlying |cos|.
    Trace t;
    t.batch = 1;
    t.layers = 1;
    t.tokens = 17;
    t.grid_h = t.grid_w = 4;
    t.norms.assign(17, 10.0f);
    t.direction_cos.assign(17, 0.1f);
    for (int k = 1; k < 17; ++k) {
        t.norms[k] += 0.1f * (k % 3);
        t.direction_cos[k] += 0.01f * (k % 4);
    }
    t.norms[1 + 3] = t.norms[1 + 9] = 60.0f;
    t.direction_cos[1 + 9] = t.direction_cos[1 + 12] = 0.95f;
    ArtifactRule rule;
    CHECK(rule.flag(t, 0, 0) == std::vector<int>{4, 10});
    rule.test = ArtifactTest::Direction;
    CHECK(rule.flag(t, 0, 0) == std::vector<int>{10, 13});
    rule.test = ArtifactTest::Both;
    CHECK(rule.flag(t, 0, 0) == std::vector<int>{10});
    CHECK(rule.describe() == "norm > median + 10\u00b7MAD and |cos(x, u_i)| > median + 10\u00b7MAD");
    t.direction_cos.clear();
    CHECK_THROWS_AS(rule.flag(t, 0, 0), UsageError);
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
    StudyConfig config = StudyConfig::parse(fixture(kPlantedDirection));
    StudyOptions o;
    o.resize = ResizeSpec::parse("16x16");
    o.timing_images = 0;
    const auto study = run_study({config}, images, o);
    const auto& row = study["configs"][0]["defects"];
    REQUIRE(row["images"].size() == 2);
    for (const auto& image : row["images"]) {
        // The highest-norm patch lies along u (this model amplifies v in every token).
        CHECK(image["top_angle_deg"].get<double>() < 10.0);
        for (const char* k : {"flagged_norm", "flagged_direction", "flagged_both"}) {
            CHECK(image[k].get<double>() >= 0.0);
            CHECK(image[k].get<double>() <= 1.0);
            CHECK(std::fmod(image[k].get<double>() * patches, 1.0) == Approx(0.0).margin(1e-9));
        }
        CHECK(image["flagged_both"].get<double>() <= image["flagged_direction"].get<double>());
    }
    const auto& summary = study["configs"][0]["summary"];
    CHECK(summary["defect_top_angle_deg"].get<double>() < 10.0);
    CHECK(study["configs"][0]["artifact_rule"]["rule"] == "norm");
    CHECK(study_csv(study).find("defect_top_angle_deg") != std::string::npos);
}

TEST_CASE("the direction rule flags the planted cells and not the garments the norm rule flags", "[defects]") {
    // tests/fixtures/make_defects.py: an 8x8-grid model whose planted cells carry a large share of
    // v = u_i, and 32 px canvases of textured garments on plain backgrounds.
    const nlohmann::json info = vitreg::test::fixture_json("defects/canvases.json");
    const Model m = Model::load(fixture(info["model"].get<std::string>()));
    auto cells = [&](const nlohmann::json& list) {
        std::vector<int> tokens;
        for (const auto& c : list) tokens.push_back(1 + c[0].get<int>() * 8 + c[1].get<int>());
        std::sort(tokens.begin(), tokens.end());
        return tokens;
    };
    const std::vector<int> planted = cells(info["planted"]);
    REQUIRE(planted.size() == 2);
    std::map<ArtifactTest, ArtifactRule> rules;
    for (ArtifactTest test : {ArtifactTest::Norm, ArtifactTest::Direction, ArtifactTest::Both}) {
        ArtifactRule r;
        r.test = test;
        rules[test] = r.for_model(m);
    }
    REQUIRE(abs_cosine(rules[ArtifactTest::Direction].defects->direction(0),
                       SafetensorsFile(fixture("defects/planted_direction.safetensors")).get("direction").to_float().data(),
                       m.config().dim) >= 0.999);
    REQUIRE(info["images"].size() == 3);
    for (const auto& [name, image] : info["images"].items()) {
        CAPTURE(name);
        const std::string path = fixture("defects/canvases/" + name + ".png");
        const Pixels px = preprocess(decode_image(path), ResizeSpec::parse("none"), m.config(), path);
        REQUIRE(px.width == 32);
        Probe probe;
        rules[ArtifactTest::Both].ask(probe);  // norms and |cos|: what every rule reads
        Trace t;
        m.forward(px.chw.data(), 1, px.height, px.width, probe, t);
        const std::vector<int> garment = cells(image["garment"]);
        std::vector<int> planted_and_garment;
        std::set_union(planted.begin(), planted.end(), garment.begin(), garment.end(), std::back_inserter(planted_and_garment));
        // norm misfires: every garment patch is flagged beside the planted ones.
        CHECK(rules[ArtifactTest::Norm].flag(t, 0, 0) == planted_and_garment);
        CHECK(rules[ArtifactTest::Direction].flag(t, 0, 0) == planted);
        CHECK(rules[ArtifactTest::Both].flag(t, 0, 0) == planted);
    }
}

TEST_CASE("@inpaint=directions equals the reference's neighbour mean over the direction-flagged patches", "[defects]") {
    const nlohmann::json info = vitreg::test::fixture_json("defects/canvases.json");
    const std::string directions = fixture(info["inpaint"]["directions"].get<std::string>());
    const std::string model = fixture(info["model"].get<std::string>());
    const Model plain = Model::load(model);
    const Model repaired = open_spec(model + "@inpaint=directions:" + directions + ":all");
    const SafetensorsFile expected(fixture(info["inpaint"]["file"].get<std::string>()));
    for (const auto& [name, image] : info["images"].items()) {
        CAPTURE(name);
        const std::string path = fixture("defects/canvases/" + name + ".png");
        const Pixels px = preprocess(decode_image(path), ResizeSpec::parse("none"), plain.config(), path);
        const Features got = repaired.forward(px.chw.data(), 1, px.height, px.width);
        CHECK(vitreg::test::relative_error(got.patches, expected.get(name).to_float()) < 1e-4);
        // Only the planted cells changed: the garments the norm rule would have inpainted did not.
        const Features before = plain.forward(px.chw.data(), 1, px.height, px.width);
        const int dim = plain.config().dim;
        std::vector<int> changed;
        for (int k = 0; k < 64; ++k)
            if (!std::equal(got.patches.begin() + k * dim, got.patches.begin() + (k + 1) * dim, before.patches.begin() + k * dim))
                changed.push_back(k);
        CHECK(changed == std::vector<int>{1 * 8 + 6, 6 * 8 + 1});
    }
}

TEST_CASE("@inpaint=directions refuses a missing file, another model's directions and a bad layer list", "[defects]") {
    const std::string model = fixture("defects/planted_canvas_f16.safetensors");
    const std::string other = fixture("defects/planted.defects.safetensors");  // 4 layers
    CHECK_THROWS_WITH(open_spec(model + "@inpaint=directions"), Catch::Contains("names no defects file"));
    CHECK_THROWS_WITH(open_spec(model + "@inpaint=directions:/nonexistent.safetensors"),
                      Catch::Contains("@inpaint=directions:/nonexistent.safetensors"));
    CHECK_THROWS_WITH(open_spec(model + "@inpaint=directions:" + fixture("defects/planted_direction.safetensors")),
                      Catch::Contains("not a defects file"));
    CHECK_THROWS_WITH(open_spec(model + "@inpaint=directions:" + other),
                      Catch::Contains("for 4 layers of width 64, the model has 1 of width 64"));
    CHECK_THROWS_WITH(open_spec(model + "@inpaint=directions:" + fixture("defects/planted_canvas.defects.safetensors") + ":5"),
                      Catch::Contains("@inpaint=directions:"));
    CHECK_THROWS_WITH(open_spec(model + "@inpaint=angles"), Catch::Contains("@inpaint=directions:FILE[:LAYERS]"));
}
