// compare(): the planted-outlier model beside itself with a test-time register on two fixture
// images: the outlined patches against the median + k·MAD rule recomputed from the trace's
// norms, the summary against the rows as written, the best marked, and stats.json / stats.csv.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "test_support.hpp"
#include "vitreg/analysis/compare.hpp"
#include "vitreg/error.hpp"

using namespace vitreg;

namespace {

// The planted model's chosen patches (tests/fixtures/make_fixtures.py, PLANTED_CELLS on its
// native 4x4 grid) as token indices: CLS = 0, no registers.
const std::vector<int> kPlantedTokens = {1 + 0 * 4 + 1, 1 + 2 * 4 + 2, 1 + 3 * 4 + 0};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Patches whose output norm exceeds median + k·MAD over the image's patches (MAD unscaled).
std::vector<int> robust_outliers(const Trace& t, double k) {
    const float* norms = t.norms_of(t.layers - 1, 0);
    std::vector<double> patch(norms + t.patch_offset(), norms + t.patch_offset() + t.patch_count()), dev;
    const double m = median(patch);
    for (double v : patch) dev.push_back(std::fabs(v - m));
    const double threshold = m + k * median(dev);
    std::vector<int> out;
    for (int i = 0; i < t.patch_count(); ++i)
        if (patch[i] > threshold) out.push_back(t.patch_offset() + i);
    return out;
}

std::vector<LabelledModel> planted_configs() {
    const Model plain = Model::load(test::fixture("models/planted_f32.safetensors"));
    Intervention ttr;
    ttr.test_time_registers = 1;
    ttr.register_neurons = {{1, 21}};  // the planted neuron (PLANTED_BLOCK, PLANTED_NEURON)
    return {{"planted", plain}, {"planted@ttr", plain.with(ttr)}};
}

CompareOptions options_16px() {
    CompareOptions o;
    o.resize = ResizeSpec::parse("16x16");  // the native grid: the planted position embeddings stay put
    o.threads = 2;
    return o;
}

}  // namespace

TEST_CASE("compare: outlines, rows and the summary of every image under every configuration", "[compare]") {
    const std::vector<std::string> images = {test::fixture("images/smooth_90x120.png"), test::fixture("images/gray16_20x10.png")};
    const CompareOptions options = options_16px();
    const CompareResult r = compare(planted_configs(), images, options);
    REQUIRE(r.cells.size() == 2);
    for (std::size_t i = 0; i < images.size(); ++i) {
        REQUIRE(r.cells[i].size() == 2);
        for (std::size_t k = 0; k < 2; ++k) {
            const CompareCell& cell = r.cells[i][k];
            INFO("image " << i << ", configuration " << k);
            CHECK(cell.outlined() == robust_outliers(cell.inspection.trace, options.rules.rule.mad_k));
            CHECK(cell.row.at(0) == std::make_pair(std::string("image"), images[i]));
            CHECK(cell.row.at(1) == std::make_pair(std::string("config"), r.configs[k].label));
            CHECK(cell.stats.layers.size() == 4);
        }
        // The planted neuron lifts exactly the chosen patches; the test-time register takes it over.
        CHECK(r.cells[i][0].outlined() == kPlantedTokens);
        CHECK(r.cells[i][1].outlined().empty());
    }

    // The summary: per column after "grid", mean and sample sd over the images of the values as written.
    const StatsRow& header = r.cells[0][0].row;
    const auto grid = std::find_if(header.begin(), header.end(), [](const auto& kv) { return kv.first == "grid"; });
    REQUIRE(r.summary.size() == static_cast<std::size_t>(header.end() - grid - 1));
    for (std::size_t c = 0; c < r.summary.size(); ++c) {
        const ColumnSummary& col = r.summary[c];
        const std::size_t column = static_cast<std::size_t>(grid - header.begin()) + 1 + c;
        CHECK(col.column == header[column].first);
        for (std::size_t k = 0; k < 2; ++k) {
            const double a = std::stod(r.cells[0][k].row[column].second), b = std::stod(r.cells[1][k].row[column].second);
            CHECK(col.mean[k] == Approx((a + b) / 2).epsilon(1e-12));
            CHECK(col.sd[k] == Approx(std::fabs(a - b) / std::sqrt(2.0)).epsilon(1e-9).margin(1e-15));
        }
        const bool tie = col.mean[0] == col.mean[1];
        CHECK(col.best[0] == (col.lower_is_better && !tie && col.mean[0] < col.mean[1]));
        CHECK(col.best[1] == (col.lower_is_better && !tie && col.mean[1] < col.mean[0]));
    }
    const auto artifacts = std::find_if(r.summary.begin(), r.summary.end(), [](const auto& s) { return s.column == "artifacts_robust"; });
    REQUIRE(artifacts != r.summary.end());
    CHECK(artifacts->mean == std::vector<double>{3.0, 0.0});
    CHECK(artifacts->best == std::vector<bool>{false, true});

    // stats.json and stats.csv: one row per cell, image-major.
    const nlohmann::json j = to_json(r);
    REQUIRE(j["rows"].size() == 4);
    CHECK(j["rows"][1]["config"] == "planted@ttr");
    CHECK(j["rows"][2]["image"] == images[1]);
    CHECK(j["rows"][0]["model"] == r.configs[0].model.path());
    CHECK(j["rows"][0]["per_layer"]["layers"].size() == 4);
    CHECK(j["rows"][0]["per_layer"]["layers"][3]["artifact_positions_robust"] == nlohmann::json::parse("[[0,1],[2,2],[3,0]]"));
    CHECK(j["summary"]["images"] == 2);
    CHECK(j["summary"]["configs"][1]["config"] == "planted@ttr");
    CHECK(j["mad_k"] == options.rules.rule.mad_k);
    std::istringstream csv(stats_csv(r));
    std::string line;
    std::vector<std::string> lines;
    while (std::getline(csv, line)) lines.push_back(line);
    REQUIRE(lines.size() == 5);
    CHECK(lines[0].rfind("image,config,attention,", 0) == 0);
    CHECK(summary_text(r).find("[2] planted@ttr") != std::string::npos);
}

TEST_CASE("compare: one configuration ranks nothing; a bad image leaves no result", "[compare]") {
    const std::vector<LabelledModel> one = {planted_configs().front()};
    const std::vector<std::string> image = {test::fixture("images/smooth_90x120.png")};
    const CompareResult r = compare(one, image, options_16px());
    for (const auto& col : r.summary) {
        CHECK(col.best == std::vector<bool>{false});
        CHECK(col.sd == std::vector<double>{0.0});
    }
    test::TempDir tmp;
    test::write_bytes(tmp / "bad.png", "not a png");
    CHECK_THROWS_AS(compare(one, {image[0], tmp / "bad.png"}, options_16px()), ImageError);
    CHECK_THROWS_AS(compare(one, {}, options_16px()), UsageError);
}
