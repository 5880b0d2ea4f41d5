// render::write_maps (`vitreg maps` as a library call) on the shipped model: the attention rows
// against softmax(q·k/√d) recomputed from the recorded q and k, the norms against the recorded
// residual stream, the statistics against those norms, the files against the result, and the
// faults that must leave no folder behind.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/render/maps.hpp"
#include "vitreg/writers.hpp"

using namespace vitreg;

namespace {

const char* kImage = "images/smooth_90x120.png";

Model shipped() { return Model::load(resolve_model_path("vitreg-untrained-s14-d192-reg4")); }

// The chosen layers' residual stream and q|k|v, from a forward of the same pixels with another probe.
Trace reference_trace(const Model& m, const std::vector<int>& layers) {
    const Pixels px = load_pixels(test::fixture(kImage), ResizeSpec{}, m.config(), ImageLimits{});
    Probe probe;
    probe.block_layers = layers;
    probe.qkv_layers = layers;
    Trace t;
    m.forward(px.chw.data(), 1, px.height, px.width, probe, t, ForwardOptions{2});
    return t;
}

// Head h's softmax row of `query` at recorded layer slot l: softmax(q·k / √head_dim) over the keys.
std::vector<float> softmax_row(const Trace& t, int l, int h, int query, int head_dim) {
    const float* qkv = t.qkv_of(l, 0);
    const int row = 3 * t.dim;
    const float* q = qkv + static_cast<std::size_t>(query) * row + h * head_dim;
    std::vector<double> logits(t.tokens);
    for (int k = 0; k < t.tokens; ++k) {
        const float* key = qkv + static_cast<std::size_t>(k) * row + t.dim + h * head_dim;
        double dot = 0;
        for (int c = 0; c < head_dim; ++c) dot += static_cast<double>(q[c]) * key[c];
        logits[k] = dot / std::sqrt(static_cast<double>(head_dim));
    }
    const double top = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double& v : logits) sum += (v = std::exp(v - top));
    std::vector<float> out;
    for (double v : logits) out.push_back(static_cast<float>(v / sum));
    return out;
}

std::vector<float> l2_norms(const float* rows, int tokens, int dim) {
    std::vector<float> out;
    for (int i = 0; i < tokens; ++i) {
        double s = 0;
        for (int c = 0; c < dim; ++c) s += static_cast<double>(rows[i * dim + c]) * rows[i * dim + c];
        out.push_back(static_cast<float>(std::sqrt(s)));
    }
    return out;
}

float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

TEST_CASE("write_maps: attention rows and norms recomputed, statistics and files agree", "[maps]") {
    const Model m = shipped();
    const Config& c = m.config();
    test::TempDir dir;
    render::MapsOptions o;
    o.out = dir / "maps";
    o.layers = "0,-1";
    o.query = "patch:3,4";
    o.rollout = true;
    o.discard = 0.5f;
    o.save_attention = o.save_norms = true;
    o.threads = 2;
    const render::MapsResult r = render::write_maps(m, test::fixture(kImage), o);

    const int tokens = 1 + 4 + 16 * 16, query = 1 + 4 + 3 * 16 + 4;
    REQUIRE(r.attention.shape == std::vector<std::int64_t>{2, c.heads, 1, tokens});
    REQUIRE(r.norms.shape == std::vector<std::int64_t>{c.depth, tokens});
    const std::vector<int> layers = {0, c.depth - 1};
    const Trace t = reference_trace(m, layers);
    for (std::size_t l = 0; l < layers.size(); ++l) {
        INFO("layer " << layers[l]);
        const std::vector<float> norms = l2_norms(t.block_of(static_cast<int>(l), 0), tokens, c.dim);
        CHECK(test::relative_error(r.norms.values.data() + layers[l] * tokens, norms) < 1e-5);
        for (int h = 0; h < c.heads; ++h) {
            const float* row = r.attention.values.data() + (l * c.heads + h) * tokens;
            double sum = 0;
            for (int k = 0; k < tokens; ++k) sum += row[k];
            CHECK(sum == Approx(1.0).epsilon(1e-5));
            CHECK(test::relative_error(row, softmax_row(t, static_cast<int>(l), h, query, c.head_dim)) < 1e-5);
        }
    }

    // The output layer's statistics are those of its patch norms.
    const float* out = r.norms.values.data() + (c.depth - 1) * tokens;
    const std::vector<float> patches(out + 5, out + tokens);
    CHECK(r.stats.layers.back().norm_max == Approx(*std::max_element(patches.begin(), patches.end())).epsilon(1e-6));
    CHECK(r.stats.layers.back().norm_median == Approx(median(patches)).epsilon(1e-6));
    CHECK(r.stats_json["query"] == "patch:3,4");
    CHECK(r.stats_json["layers"].size() == static_cast<std::size_t>(c.depth));
    CHECK(r.stats_json["heads"].size() == static_cast<std::size_t>(c.depth * c.heads));
    CHECK(r.stats_json["grid"] == nlohmann::json::array({16, 16}));

    // The files: the pictures (no abstention.png for softmax), stats.json and the arrays, as returned.
    std::vector<std::string> want;
    for (const char* name : {"attention.png", "norms.png", "histogram.png", "rollout.png", "stats.json", "attention.npy", "norms.npy"})
        want.push_back(o.out + "/" + name);
    CHECK(r.written == want);
    for (const auto& path : r.written) CHECK(test::read_bytes(path).size() > 100);
    CHECK(nlohmann::json::parse(test::read_bytes(o.out + "/stats.json")) == r.stats_json);
    CHECK(test::read_bytes(o.out + "/attention.npy") == npy_bytes(ArrayRef{r.attention.shape, r.attention.values.data()}));
    CHECK(test::read_bytes(o.out + "/norms.npy") == npy_bytes(ArrayRef{r.norms.shape, r.norms.values.data()}));
}

TEST_CASE("write_maps: no folder without out, and faults in the options or the input write nothing", "[maps]") {
    const Model m = shipped();
    test::TempDir dir;
    render::MapsOptions o;
    o.threads = 2;
    const render::MapsResult r = render::write_maps(m, test::fixture(kImage), o);
    CHECK(r.written.empty());
    CHECK(r.query == "cls");
    CHECK(r.attention.shape == std::vector<std::int64_t>{m.config().depth, m.config().heads, 1, 261});

    o.out = dir / "never";
    const auto fails = [&](const render::MapsOptions& options, const std::string& message) {
        INFO(message);
        CHECK_THROWS_WITH(render::write_maps(m, test::fixture(kImage), options), Catch::Contains(message));
        CHECK_FALSE(std::filesystem::exists(o.out));
    };
    render::MapsOptions bad = o;
    bad.query = "probe";
    fails(bad, "attention-pool head");
    bad = o;
    bad.query = "probe";
    bad.rollout = true;
    fails(bad, "the probe query has none");
    bad = o;
    bad.heads = "sum";
    fails(bad, "heads 'sum'");
    bad = o;
    bad.discard = 1.0f;
    fails(bad, "outside [0, 0.99]");
    bad = o;
    bad.layers = "6";
    fails(bad, "out of range");
    bad = o;
    bad.query = "patch:16,0";
    fails(bad, "outside the 16x16 patch grid");
    CHECK_THROWS_AS(render::write_maps(m, test::fixture("missing.png"), o), Error);
    CHECK_FALSE(std::filesystem::exists(o.out));
}
