// Dense features: intermediate blocks against the reference, bilinear upsampling against
// torch, pixel alignment, the PCA view, float16 storage and the linear probe; dense views
// (sliding window, scales, flip) and JBU against the reference.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/dense.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/linear_probe.hpp"
#include "vitreg/analysis/pca.hpp"
#include "core/resample.hpp"
#include "batch/feature_upsampler.hpp"
#include "vitreg/writers.hpp"

using namespace vitreg;
using namespace vitreg::test;

TEST_CASE("intermediate blocks equal the reference's, raw and normed") {
    for (const auto& c : fixture_json("traces.json")) {
        INFO("trace " << c["name"].get<std::string>());
        const Model m = Model::load(fixture(c["model"].get<std::string>()));
        const SafetensorsFile f(fixture(c["file"].get<std::string>()));
        const auto input = tensor(f, "input");
        for (const bool normed : {false, true}) {
            Probe p;
            p.block_layers = resolve_layers("all", m.config().depth);
            p.blocks_normed = normed;
            Trace t;
            m.forward(input.data(), 1, c["height"].get<int>(), c["width"].get<int>(), p, t);
            CHECK(relative_error(t.blocks, tensor(f, normed ? "blocks_normed" : "blocks")) < 1e-4);
        }
    }
}

TEST_CASE("layer lists resolve like get_intermediate_layers") {
    CHECK(resolve_layers("-4,-3,-2,-1", 12) == std::vector<int>{8, 9, 10, 11});
    CHECK(resolve_layers("last", 12) == std::vector<int>{11});
    CHECK(resolve_layers("0,5", 12) == std::vector<int>{0, 5});
    CHECK(resolve_layers("all", 3) == std::vector<int>{0, 1, 2});
    CHECK_THROWS_WITH(resolve_layers("12", 12), Catch::Contains("out of range"));
    CHECK_THROWS_WITH(resolve_layers("-13", 12), Catch::Contains("out of range"));
    CHECK_THROWS_WITH(resolve_layers("1,,2", 12), Catch::Contains("layer ''"));
}

TEST_CASE("bilinear upsampling equals torch interpolate(align_corners=False)") {
    const SafetensorsFile f(fixture("upsample.safetensors"));
    const auto src = tensor(f, "src");  // [3, 5, 4]
    for (const auto [name, h, w] : {std::tuple{"size_12x20", 12, 20}, {"size_7x11", 7, 11}, {"x4", 12, 20}}) {
        INFO(name);
        const auto got = resample_hwc(src.data(), 3, 5, 4, linear_axis(3, h), linear_axis(5, w));
        CHECK(relative_error(got, tensor(f, name)) < 1e-6);
    }
}

TEST_CASE("float16 narrowing round-trips every half and rounds ties to even") {
    int bad = 0;
    for (std::uint32_t h = 0; h < 0x7c00; ++h) {
        if (float_to_half(half_to_float(static_cast<std::uint16_t>(h))) != h) ++bad;
        if (h + 1 < 0x7c00) {
            const float mid = 0.5f * (half_to_float(static_cast<std::uint16_t>(h)) + half_to_float(static_cast<std::uint16_t>(h + 1)));
            if (float_to_half(mid) != ((h & 1) ? h + 1 : h)) ++bad;
        }
    }
    CHECK(bad == 0);
    CHECK(float_to_half(1e6f) == 0x7c00);
    CHECK(float_to_half(-0.0f) == 0x8000);
    const std::vector<float> v{1.5f, -2.25f};
    CHECK_THAT(npy_bytes(ArrayRef{{2}, v.data(), DType::F16}), Catch::Contains("'descr': '<f2'"));
}

TEST_CASE("dense grids line up with the pixels: a vertical edge shows in exactly its patch column") {
    TempDir dir;
    // 224×224, dark left of x = 98 (= 7 patches of 14), bright right of it.
    std::string ppm = "P6\n224 224\n255\n";
    for (int y = 0; y < 224; ++y)
        for (int x = 0; x < 224; ++x) ppm += std::string(3, static_cast<char>(x < 98 ? 30 : 220));
    write_bytes(dir / "edge.ppm", ppm);
    write_bytes(dir / "broken.png", "not a png");
    const Model m = Model::load(resolve_model_path("vitreg-untrained-s14-d192-reg4"));
    DenseOptions o;
    o.out_dir = dir / "out";
    o.resize = ResizeSpec::parse("none");
    o.layers = "-1";
    o.norm = true;
    const auto s = dense_features(m, {dir / "broken.png", dir / "edge.ppm"}, o);
    CHECK(s.ok == 1);
    CHECK(s.failed == 1);
    const std::string b = read_bytes(o.out_dir + "/0.npy");
    const std::size_t start = 10 + (static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8));
    std::vector<float> f((b.size() - start) / 4);
    std::memcpy(f.data(), b.data() + start, f.size() * 4);
    REQUIRE(f.size() == 16u * 16 * 192);
    // Mean feature change between neighbouring columns, averaged over rows.
    std::vector<double> jump(15, 0.0);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 15; ++c) {
            double d = 0;
            for (int k = 0; k < 192; ++k) {
                const double e = f[(r * 16 + c + 1) * 192 + k] - f[(r * 16 + c) * 192 + k];
                d += e * e;
            }
            jump[c] += std::sqrt(d);
        }
    const auto biggest = std::max_element(jump.begin(), jump.end()) - jump.begin();
    CHECK(biggest == 6);  // between columns 6 (x < 98) and 7 (x >= 98)
    // The manifest's geometry maps cell (i, j) back to the source pixels.
    std::ifstream man(o.out_dir + "/manifest.jsonl");
    std::string line;
    std::getline(man, line);
    CHECK(nlohmann::json::parse(line)["status"] == "error");
    std::getline(man, line);
    const auto row = nlohmann::json::parse(line);
    const auto& g = row["geometry"];
    CHECK(g["patch"] == 14);
    CHECK(g["source_width"] == 224);
    CHECK(g["scale_x"] == 1.0);
    CHECK(g["crop_left"] == 0);
    CHECK(row["shape"] == nlohmann::json::array({16, 16, 192}));
}

TEST_CASE("eval-resized geometry round-trips to source pixels") {
    Geometry g = plan_geometry(512, 341, ResizeSpec::parse("eval"), 14, "x");
    // Cell (0, 0)'s left edge in the model input is x = 0 → resized x = crop_left → source x.
    const double source_x = (0 + g.crop_left) * static_cast<double>(g.source_width) / g.resized_width;
    CHECK(g.resized_height == 256);
    CHECK(g.resized_width == 384);
    CHECK(g.crop_left == 80);
    CHECK(source_x == Approx(80 * 512.0 / 384));
}

TEST_CASE("a resize that would make a huge intermediate image is refused, naming the file") {
    // 256:1 still fits; a 734465x5 strip (a 33-byte PGM found by fuzz_image) would need 9.6e9 pixels.
    CHECK(plan_geometry(65536, 256, ResizeSpec::parse("eval"), 14, "x").resized_width == 65536);
    for (const char* spec : {"eval", "short:224", "65534x65534"}) {
        INFO(spec);
        try {
            plan_geometry(734465, 5, ResizeSpec::parse(spec), 14, "strip.pgm");
            FAIL("not refused");
        } catch (const vitreg::ImageError& e) {
            CHECK_THAT(e.what(), Catch::Contains("strip.pgm") && Catch::Contains("over the limit of 16777216"));
        }
    }
}

TEST_CASE("PCA view: the first component finds the object, the border is background") {
    // 8×8 grid, dim 6: a centre square of 'object' patches, background elsewhere.
    std::vector<float> f(64 * 6);
    for (int p = 0; p < 64; ++p) {
        const int r = p / 8, c = p % 8;
        const bool object = r >= 2 && r < 6 && c >= 2 && c < 6;
        for (int d = 0; d < 6; ++d) f[p * 6 + d] = (object ? (d < 3 ? 3.0f : -1.0f) : 0.0f) + 0.05f * std::sin(p * 7.0f + d);
    }
    const auto views = pca_preview({PatchFeatures{f.data(), 8, 8}}, 6);
    REQUIRE(views.size() == 1);
    for (int p = 0; p < 64; ++p) {
        const int r = p / 8, c = p % 8;
        const bool object = r >= 2 && r < 6 && c >= 2 && c < 6;
        CHECK(views[0].foreground[p] == (object ? 1 : 0));
        if (!object) CHECK(views[0].rgb[p * 3] == 0.0f);
    }
    // Deterministic, and jointly fitted over two copies gives the same picture twice.
    const auto again = pca_preview({PatchFeatures{f.data(), 8, 8}, PatchFeatures{f.data(), 8, 8}}, 6);
    CHECK(again[0].foreground == again[1].foreground);
    CHECK(again[0].rgb == again[1].rgb);
}

TEST_CASE("linear probe: separable features score mIoU 1, and patch labels take the majority") {
    std::vector<std::uint8_t> mask(8 * 4, 0);  // 8 wide, 4 high, patch 4 → 1×2 cells
    for (int y = 0; y < 4; ++y)
        for (int x = 4; x < 8; ++x) mask[y * 8 + x] = (x < 7 || y == 0) ? 2 : 0;  // right cell mostly class 2
    CHECK(patch_labels(mask.data(), 8, 4, 4) == std::vector<int>{0, 2});
    auto sample = [](int n, unsigned seed) {
        LabelledPatches s;
        for (int i = 0; i < n; ++i) {
            const int label = static_cast<int>((i * 7 + seed) % 3);
            s.labels.push_back(label);
            for (int d = 0; d < 4; ++d) s.features.push_back((d == label ? 2.0f : 0.0f) + 0.1f * std::cos(i * 3.0f + d + seed));
        }
        return s;
    };
    const auto r = linear_probe({sample(60, 1)}, {sample(30, 2)}, 4, 3, 0.1);
    CHECK(r.miou == Approx(1.0));
    CHECK(r.accuracy == Approx(1.0));
    CHECK(r.test_patches == 30);
    // Features that carry no information cannot reach that.
    LabelledPatches noise = sample(60, 1);
    for (std::size_t i = 0; i < noise.features.size(); ++i) noise.features[i] = std::sin(static_cast<float>(i) * 12.9898f);
    LabelledPatches noise_test = sample(30, 2);
    for (std::size_t i = 0; i < noise_test.features.size(); ++i) noise_test.features[i] = std::sin(static_cast<float>(i) * 78.233f);
    CHECK(linear_probe({noise}, {noise_test}, 4, 3, 0.1).miou < 0.7);
}

TEST_CASE("sliding-window crops cover the axis, the last flush with the edge") {
    CHECK(window_starts(2048, 512, 341) == std::vector<int>{0, 341, 682, 1023, 1364, 1536});
    CHECK(window_starts(44, 20, 12) == std::vector<int>{0, 12, 24});
    CHECK(window_starts(40, 20, 20) == std::vector<int>{0, 20});
    CHECK(window_starts(16, 20, 8) == std::vector<int>{0});  // a crop larger than the image is the image
    CHECK(scaled_size(28, 40, 0.5, 4) == std::pair{16, 20});  // 14 -> 16 (rounded half up), 20
    CHECK(scaled_size(28, 40, 1.5, 4) == std::pair{44, 60});  // 10.5 -> 11 patches
}

TEST_CASE("dense views (window, scales, flip, grid) equal the reference's, learned positions and RoPE") {
    for (const auto& c : fixture_json("dense_views.json")) {
        const std::string name = c["name"].get<std::string>();
        INFO("view " << name);
        const Model m = Model::load(fixture(c["model"].get<std::string>()));
        const SafetensorsFile f(fixture(c["file"].get<std::string>()));
        Pixels px;
        px.height = c["height"].get<int>();
        px.width = c["width"].get<int>();
        px.chw = tensor(f, "input");
        DenseOptions o;
        std::string layers;
        for (const int l : c["layers"]) layers += (layers.empty() ? "" : ",") + std::to_string(l);
        o.layers = layers;
        o.norm = true;
        o.view.window = c["window"].get<int>();
        o.view.stride = c["stride"].get<int>();
        if (c.contains("scales")) o.view.scales = c["scales"].get<std::vector<double>>();
        o.view.flip = c.value("flip", false);
        if (c.contains("grid")) o.view.grid_h = c["grid"][0].get<int>(), o.view.grid_w = c["grid"][1].get<int>();
        const auto got = dense_array(m, px, o);
        const auto want = tensor(f, "grid");  // [L, gh, gw, D]
        CHECK(got.data.size() == want.size());
        CHECK(relative_error(got.data, want) < 1e-5);
        if (name == "learned_window") {
            o.parse_upsample("image");
            const auto up = dense_array(m, px, o);
            CHECK(up.shape == std::vector<std::int64_t>{2, px.height, px.width, m.config().dim});
            CHECK(relative_error(up.data, tensor(f, "bilinear_image")) < 1e-5);
            o.concat = true;  // the same numbers, channels side by side
            const auto side = dense_array(m, px, o);
            CHECK(side.shape == std::vector<std::int64_t>{px.height, px.width, 2 * m.config().dim});
            CHECK(side.data[m.config().dim] == up.data[static_cast<std::size_t>(px.height) * px.width * m.config().dim]);
        }
    }
}

TEST_CASE("joint bilateral upsampling equals the reference's, to the guide's size and to a factor") {
    const SafetensorsFile f(fixture("dense_views/jbu.safetensors"));
    const auto src = tensor(f, "src");  // [5, 7, 6]
    GuideImage guide{28, 20, tensor(f, "guide")};
    for (const auto [name, h, w] : {std::tuple{"jbu_image", 20, 28}, {"jbu_x3", 15, 21}}) {
        INFO(name);
        const FeatureUpsampler up(src.data(), 5, 7, 6, h, w, UpsampleMethod::Jbu, &guide, JbuOptions{});
        std::vector<float> got(static_cast<std::size_t>(h) * w * 6);
        for (int y = 0; y < h; ++y) up.row(y, got.data() + static_cast<std::size_t>(y) * w * 6);
        CHECK(relative_error(got, tensor(f, name)) < 1e-5);
        // Bilinear through the same rows equals resample_hwc's whole-grid answer.
        const FeatureUpsampler bl(src.data(), 5, 7, 6, h, w, UpsampleMethod::Bilinear);
        for (int y = 0; y < h; ++y) bl.row(y, got.data() + static_cast<std::size_t>(y) * w * 6);
        CHECK(relative_error(got, resample_hwc(src.data(), 5, 7, 6, linear_axis(5, h), linear_axis(7, w))) < 1e-6);
    }
}

TEST_CASE("bad dense views and upsampling are refused naming the option") {
    DenseOptions o;
    o.view.window = 500;
    CHECK_THROWS_WITH(o.check(14), Catch::Contains("--window 500") && Catch::Contains("490 or 504"));
    o.view.window = 56;
    o.view.stride = 70;
    CHECK_THROWS_WITH(o.check(14), Catch::Contains("--stride 70 is larger than --window 56"));
    o.view.stride = 30;
    CHECK_THROWS_WITH(o.check(14), Catch::Contains("--stride 30") && Catch::Contains("28 or 42"));
    o.view.stride = 28;
    CHECK_NOTHROW(o.check(14));
    CHECK_THROWS_WITH(o.view.parse_scales("0.5,0"), Catch::Contains("scale 0 must be above 0"));
    CHECK_THROWS_WITH(o.view.parse_scales("1,-2"), Catch::Contains("must be above 0"));
    CHECK_THROWS_WITH(o.view.parse_scales("1,x"), Catch::Contains("'x' is not a number"));
    CHECK_THROWS_WITH(o.view.parse_grid("12"), Catch::Contains("--grid '12'"));
    CHECK_THROWS_WITH(o.parse_upsample("cubic"), Catch::Contains("bad --upsample 'cubic'"));
    o.parse_upsample("jbu:x4");
    CHECK(o.upsample_text() == "jbu:x4");
    o.parse_upsample("x2");
    CHECK(o.upsample_text() == "x2");
    o.jbu.sigma_range = 0.3;
    CHECK_THROWS_WITH(o.check(14), Catch::Contains("apply only to --upsample jbu"));
    o.parse_upsample("jbu");
    CHECK(o.upsample_text() == "jbu:image");
    CHECK_NOTHROW(o.check(14));
}

TEST_CASE("DINOv3's PCA picture: fitted on the foreground, whitened there, background dimmed") {
    std::vector<float> f(64 * 6);
    for (int p = 0; p < 64; ++p) {
        const int r = p / 8, c = p % 8;
        const bool object = r >= 2 && r < 6 && c >= 2 && c < 6;
        for (int d = 0; d < 6; ++d) f[p * 6 + d] = (object ? (d < 3 ? 3.0f : -1.0f) : 0.0f) + 0.3f * std::sin(p * 7.0f + d * 1.3f);
    }
    const auto pca = pca_foreground(PatchFeatures{f.data(), 8, 8}, 6);
    double mean[3] = {0, 0, 0}, square[3] = {0, 0, 0};
    int count = 0;
    for (int p = 0; p < 64; ++p) {
        const int r = p / 8, c = p % 8;
        CHECK(pca.foreground[p] == ((r >= 2 && r < 6 && c >= 2 && c < 6) ? 1 : 0));
        if (!pca.foreground[p]) continue;
        ++count;
        for (int k = 0; k < 3; ++k) mean[k] += pca.whitened[p * 3 + k], square[k] += pca.whitened[p * 3 + k] * pca.whitened[p * 3 + k];
    }
    for (int k = 0; k < 3; ++k) {
        CHECK(mean[k] / count == Approx(0).margin(1e-5));
        CHECK(square[k] / (count - 1) == Approx(1).epsilon(1e-4));  // unit variance over the foreground
    }
    // A mask chooses the foreground instead; one that does not fit the grid is refused.
    std::vector<std::uint8_t> mask(64, 0);
    for (int p = 0; p < 16; ++p) mask[p] = 1;
    CHECK(pca_foreground(PatchFeatures{f.data(), 8, 8}, 6, mask).foreground == mask);
    CHECK_THROWS_WITH(pca_foreground(PatchFeatures{f.data(), 8, 8}, 6, std::vector<std::uint8_t>(10, 1)),
                      Catch::Contains("10 cells for a grid of 64"));
    const float zero[3] = {0, 0, 0};
    float rgb[3];
    foreground_colour(zero, 1.0f, rgb);
    CHECK(rgb[0] == Approx(0.5f));
    foreground_colour(zero, 0.0f, rgb);
    CHECK(rgb[2] == Approx(0.5f * kBackgroundDim));
}
