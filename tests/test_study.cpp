// vitreg study against the PyTorch reference (tests/reference/study_reference.py): every number
// of study.json on the planted-outlier model (plain and with a test-time register), a sink
// model with registers and a softmax-1 model with registers, four images at three sizes.
#include <catch2/catch.hpp>
#include <cmath>
#include <algorithm>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/model_spec.hpp"
#include "core/safetensors.hpp"
#include "vitreg/analysis/study.hpp"

using nlohmann::json;
using namespace vitreg;

namespace {

const std::string kFixtures = VITREG_FIXTURES_DIR;

json read_expected() {
    std::ifstream in(kFixtures + "/study/expected.json");
    REQUIRE(in);
    return json::parse(in);
}

// The fixture's pixels (already normalized, ImageNet mean/std) served as the study's images.
StudyImages fixture_images(const json& expected, std::shared_ptr<SafetensorsFile> file) {
    StudyImages images;
    images.names = expected["images"].get<std::vector<std::string>>();
    const json tensors = expected["inputs"]["tensors"];
    images.load = [file, tensors](std::size_t i, const ResizeSpec& resize, const Config&) {
        REQUIRE(resize.mode == ResizeSpec::Mode::Exact);
        REQUIRE(resize.width == resize.height);
        const TensorView& t = file->get(tensors.at(std::to_string(resize.width)).get<std::string>());
        const std::vector<float> all = t.to_float();
        const std::size_t per_image = static_cast<std::size_t>(3) * resize.width * resize.height;
        Pixels px;
        px.width = resize.width;
        px.height = resize.height;
        px.chw.assign(all.begin() + i * per_image, all.begin() + (i + 1) * per_image);
        return px;
    };
    return images;
}

// What int8 measures (cosines to fp32 of the quantized forward) are compared within. A value
// within one fp32 rounding of a uint8 rounding boundary falls either side depending on the
// summation order and on how the CPU sums bf16 products (vdpbf16ps pairs, or the fp32 kernels
// in k order): on the planted model's massive activations a few flips moved a cosine by 2.6e-4
// on a Xeon with AVX512-BF16. Everything else keeps the caller's tolerance.
constexpr double kInt8Tolerance = 1e-3;

bool int8_measure(const std::string& where) { return where.find("int8") != std::string::npos; }

// Walks `want` and checks `got` holds the same structure: strings and integers exactly, other
// numbers within `tolerance` of max(1, |want|) (int8 measures within kInt8Tolerance).
void compare(const json& got, const json& want, const std::string& where, double tolerance, int& checked) {
    INFO(where);
    if (want.is_object()) {
        REQUIRE(got.is_object());
        for (auto it = want.begin(); it != want.end(); ++it) {
            REQUIRE(got.contains(it.key()));
            compare(got[it.key()], it.value(), where + "/" + it.key(), tolerance, checked);
        }
        for (auto it = got.begin(); it != got.end(); ++it) {
            INFO("key " << it.key() << " is not in the reference");
            CHECK(want.contains(it.key()));
        }
    } else if (want.is_array()) {
        REQUIRE(got.is_array());
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) compare(got[i], want[i], where + "/" + std::to_string(i), tolerance, checked);
    } else if (want.is_null()) {
        CHECK(got.is_null());
    } else if (want.is_string() || want.is_boolean()) {
        CHECK(got == want);
        ++checked;
    } else if (want.is_number_integer() && got.is_number_integer()) {
        CHECK(got.get<long long>() == want.get<long long>());
        ++checked;
    } else {
        REQUIRE(got.is_number());
        const double g = got.get<double>(), w = want.get<double>();
        INFO("got " << g << ", reference " << w);
        const double within = int8_measure(where) ? std::max(tolerance, kInt8Tolerance) : tolerance;
        CHECK(std::fabs(g - w) <= within * std::max(1.0, std::fabs(w)));
        ++checked;
    }
}

// The defect row against the reference's (its u from defects_reference, the same seeded fit):
// the top token and the flagged shares exactly (study.Margins keeps them clear of ties), the
// angles within 0.05 degrees (u matches to |cos| >= 0.9999), then both rows taken out of `have`
// and `want` (the C++ row also states where u came from and its fit).
void check_defect_row(json& have, json& want, int& checked) {
    const json& got = have["defects"];
    const json& ref = want["defects"];
    INFO(want["name"].get<std::string>() << " defects");
    CHECK(got["layer"] == ref["layer"]);
    CHECK(got["singular_value"].get<double>() == Approx(ref["singular_value"].get<double>()).epsilon(1e-4));
    REQUIRE(got["images"].size() == ref["images"].size());
    for (std::size_t i = 0; i < ref["images"].size(); ++i) {
        const json &g = got["images"][i], &r = ref["images"][i];
        CHECK(g["top_token"] == r["top_token"]);
        CHECK(g["top_angle_deg"].get<double>() == Approx(r["top_angle_deg"].get<double>()).margin(0.05));
        for (const char* k : {"flagged_norm", "flagged_direction", "flagged_both"})
            CHECK(g[k].get<double>() == Approx(r[k].get<double>()).margin(1e-9));
        checked += 5;
    }
    CHECK(have["summary"]["defect_top_angle_deg"].get<double>() ==
          Approx(want["summary"]["defect_top_angle_deg"].get<double>()).margin(0.05));
    for (const char* k : {"defect_flagged_norm", "defect_flagged_direction", "defect_flagged_both"})
        CHECK(have["summary"][k].get<double>() == Approx(want["summary"][k].get<double>()).margin(1e-9));
    have.erase("defects");
    want.erase("defects");
    for (const char* k : {"defect_top_angle_deg", "defect_flagged_norm", "defect_flagged_direction", "defect_flagged_both"})
        have["summary"].erase(k), want["summary"].erase(k);
}

}  // namespace

TEST_CASE("study: every number against the PyTorch reference", "[study]") {
    json expected = read_expected();
    auto file = std::make_shared<SafetensorsFile>(kFixtures + "/" + expected["inputs"]["file"].get<std::string>());
    std::vector<StudyConfig> configs;
    for (const auto& c : expected["configs"]) {
        const ModelSpec spec = ModelSpec::parse(c["name"].get<std::string>());
        StudyConfig s;
        s.name = c["name"].get<std::string>();
        s.path = kFixtures + "/" + c["path"].get<std::string>();
        s.overrides.attention = spec.attention;
        if (spec.intervention) s.intervention = *spec.intervention;
        configs.push_back(s);
    }
    StudyOptions o;
    const int main_size = expected["configs"][0]["size"][0].get<int>();
    o.resize.mode = ResizeSpec::Mode::Exact;
    o.resize.width = o.resize.height = main_size;
    o.sizes = expected["sizes"].get<std::vector<int>>();
    o.rules.rule.mad_k = expected["rules"]["mad_k"].get<float>();
    o.rules.sink_alpha = expected["rules"]["sink_alpha"].get<float>();
    o.abstain = expected["rules"]["abstain"].get<float>();
    o.timing_images = 0;  // ms/image is a measurement, not a number the reference has
    const json got = run_study(configs, fixture_images(expected, file), o);

    for (const char* key : {"images", "sizes", "calibration_images", "evaluation_images"}) CHECK(got[key] == expected[key]);
    REQUIRE(got["configs"].size() == expected["configs"].size());
    int checked = 0;
    for (std::size_t k = 0; k < configs.size(); ++k) {
        json want = expected["configs"][k];
        json have = got["configs"][k];
        for (const char* local : {"path", "model", "suffix"}) want.erase(local), have.erase(local);
        check_defect_row(have, want, checked);
        have.erase("artifact_rule");  // the rule's description; the reference has the rules' numbers
        compare(have, want, want["name"].get<std::string>(), 1e-4, checked);
    }
    CHECK(checked > 1000);

    SECTION("the planted artifacts are what the study finds") {
        const json& planted = got["configs"][0];
        CHECK(planted["summary"]["massive_kind"] == "artifact");
        CHECK(planted["massive"][3]["top_kind"] == "artifact");
        CHECK(planted["retrofit"]["calibrated_sink"]["sinks"].size() == 4);
        // With a test-time register the massive activations move off the planted patches onto it.
        const json& ttr = got["configs"][1];
        CHECK(ttr["test_time_registers"] == 1);
        for (int layer = 1; layer < 4; ++layer) {
            CHECK(planted["massive"][layer]["top_kind"] == "artifact");
            CHECK(ttr["massive"][layer]["top_kind"] == "test_time_register");
        }
        CHECK(ttr["heads"][1][1]["key_kind"] == "test_time_register");
    }
}

TEST_CASE("study: csv rows are the summaries, nulls empty", "[study]") {
    json study = {{"configs", json::array()}};
    json summary = json::object();
    for (const auto& k : study_summary_columns()) summary[k] = nullptr;
    summary["name"] = "a,\"b\"";
    summary["registers"] = 4;
    summary["weights_sum_mean"] = 0.25;
    study["configs"].push_back({{"summary", summary}});
    const std::string csv = study_csv(study);
    const std::string header = csv.substr(0, csv.find('\n'));
    CHECK(header.rfind("name,attention,registers,precision,intervention,heads_dump", 0) == 0);
    const std::string row = csv.substr(csv.find('\n') + 1);
    CHECK(row.rfind("\"a,\"\"b\"\"\",,4,,,", 0) == 0);
    CHECK(row.find(",0.25,") != std::string::npos);
    CHECK(std::count(row.begin(), row.end(), ',') == std::count(header.begin(), header.end(), ',') + 1);  // + the comma inside the quoted name
}
