// Repairs (vitreg/repair.hpp; docs/design.md, "Repairs and dense evaluation") on the planted model,
// whose position embedding plants high-norm tokens at three fixed grid cells (make_fixtures.py,
// "Planted high-norm artifacts"): @inpaint against the PyTorch reference (interventions.json,
// inpaint_planted), @denoise and @debias against the norm rule, and the suffixes' errors.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "core/repair_edits.hpp"
#include "core/robust_outliers.hpp"
#include "core/safetensors.hpp"
#include "test_support.hpp"
#include "vitreg/analysis/repair_calibration.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/model_spec.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

const std::string kPlanted = "models/planted_f32.safetensors";
const std::vector<int> kPlantedPatches = {1, 10, 12};  // cells (0,1), (2,2), (3,0) of the 4x4 grid
constexpr int kSide = 16;                              // the planted model's native input

Model planted(const std::string& suffix = "") {
    return open_model(ModelRequest::from_spec(ModelSpec::parse(fixture(kPlanted) + suffix)));
}

// Nearly uniform grey images (0.5 plus noise of std 0.02), normalized as the model's: the planted
// model's kind of input, so the planted tokens are its only artifacts.
std::vector<float> grey_images(int count, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 0.02f);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    std::vector<float> px(static_cast<std::size_t>(count) * 3 * kSide * kSide);
    for (std::size_t i = 0; i < px.size(); ++i) {
        const int ch = static_cast<int>(i / (kSide * kSide)) % 3;
        px[i] = (0.5f + noise(rng) - mean[ch]) / std[ch];
    }
    return px;
}

// Each image's patch norms after the last block, and the patches the norm rule flags there.
struct LastLayer {
    std::vector<std::vector<float>> norms;
    std::vector<std::vector<int>> flagged;
};

LastLayer last_layer(const Model& m, const std::vector<float>& px, int count) {
    Probe p;
    p.norms = true;
    Trace t;
    m.forward(px.data(), count, kSide, kSide, p, t);
    LastLayer out;
    for (int b = 0; b < count; ++b) {
        const float* n = t.norms_of(t.layers - 1, b) + t.patch_offset();
        out.norms.emplace_back(n, n + t.patch_count());
        out.flagged.push_back(robust_outliers(out.norms.back(), 10.0f));
    }
    return out;
}

// The largest move of a patch norm outside the planted cells, relative to the median patch norm.
double unaffected_move(const LastLayer& before, const LastLayer& after) {
    double worst = 0;
    for (std::size_t b = 0; b < before.norms.size(); ++b) {
        const double median = median_of(before.norms[b]);
        for (std::size_t i = 0; i < before.norms[b].size(); ++i)
            if (std::find(kPlantedPatches.begin(), kPlantedPatches.end(), static_cast<int>(i)) == kPlantedPatches.end())
                worst = std::max(worst, std::abs(after.norms[b][i] - before.norms[b][i]) / median);
    }
    return worst;
}

}  // namespace

TEST_CASE("@inpaint=artifacts equals the reference's neighbour mean on the planted model") {
    const auto all = fixture_json("interventions.json");
    const auto c = std::find_if(all.begin(), all.end(), [](const auto& e) { return e["name"] == "inpaint_planted"; });
    REQUIRE(c != all.end());
    const SafetensorsFile f(fixture((*c)["file"].get<std::string>()));
    const auto input = tensor(f, "input");
    const int B = (*c)["batch"];
    const Model m = planted("@inpaint=artifacts");
    Probe p;
    p.norms = true;
    Trace t;
    const Features got = m.forward(input.data(), B, kSide, kSide, p, t);
    CHECK(relative_error(got.cls, tensor(f, "cls")) < 1e-4);
    CHECK(relative_error(got.patches, tensor(f, "patches")) < 1e-4);
    // The trace records the repaired stream: no planted token is flagged any more.
    for (int b = 0; b < B; ++b) {
        const float* n = t.norms_of(t.layers - 1, b) + t.patch_offset();
        CHECK(robust_outliers(std::vector<float>(n, n + t.patch_count()), 10.0f).empty());
    }
}

TEST_CASE("inpainting widens the neighbourhood while every neighbour is flagged") {
    // A 4x4 grid of one channel, cell value = its index; the top-left 3x3 block is flagged, so
    // the centre (1,1) has no unflagged 3x3 neighbour and takes the mean of those within 2.
    std::vector<float> grid(16);
    for (int i = 0; i < 16; ++i) grid[i] = static_cast<float>(i);
    std::vector<std::uint8_t> flagged(16, 0);
    for (int r = 0; r < 3; ++r)
        for (int col = 0; col < 3; ++col) flagged[r * 4 + col] = 1;
    const std::vector<float> before = grid;
    inpaint_flagged(grid.data(), 4, 4, 1, flagged);
    const double outside = (3 + 7 + 11 + 12 + 13 + 14 + 15) / 7.0;  // every unflagged cell
    CHECK(grid[5] == Approx(outside));                               // (1,1): radius 2
    CHECK(grid[0] == Approx(outside));                               // (0,0): radius 3
    CHECK(grid[1] == Approx((3 + 7 + 11) / 3.0));                    // (0,1): radius 2
    CHECK(grid[10] == Approx((7 + 11 + 13 + 14 + 15) / 5.0));        // (2,2): radius 1
    for (int i : {3, 7, 11, 12, 13, 14, 15}) CHECK(grid[i] == before[i]);
}

TEST_CASE("planted artifacts: @denoise and @debias bring the planted tokens under the rule") {
    const int B = 3;
    const auto px = grey_images(B, 7);
    const LastLayer plain = last_layer(planted(), px, B);
    for (const auto& f : plain.flagged) REQUIRE(f == kPlantedPatches);

    SECTION("@denoise=shift:4:median") {
        const LastLayer after = last_layer(planted("@denoise=shift:4:median"), px, B);
        for (int b = 0; b < B; ++b) {
            INFO("image " << b);
            for (int i : kPlantedPatches) WARN("planted " << i << ": " << plain.norms[b][i] << " -> " << after.norms[b][i]);
            WARN("flagged " << after.flagged[b].size() << " move " << unaffected_move(plain, after));
        }
    }
    SECTION("@denoise=shift:4") {
        const LastLayer after = last_layer(planted("@denoise=shift:4"), px, B);
        for (int b = 0; b < B; ++b) {
            for (int i : kPlantedPatches) WARN("planted " << i << ": " << plain.norms[b][i] << " -> " << after.norms[b][i]);
            WARN("flagged " << after.flagged[b].size() << " move " << unaffected_move(plain, after));
        }
    }
    SECTION("@debias over blank images") {
        TempDir dir;
        calibrate_repair_blank(planted(), 4, 3, CalibrationOptions{}).write(dir / "bias.safetensors");
        const LastLayer after = last_layer(planted("@debias=" + dir / "bias.safetensors"), px, B);
        for (int b = 0; b < B; ++b) {
            for (int i : kPlantedPatches) WARN("planted " << i << ": " << plain.norms[b][i] << " -> " << after.norms[b][i]);
            WARN("flagged " << after.flagged[b].size() << " move " << unaffected_move(plain, after));
        }
    }
}
