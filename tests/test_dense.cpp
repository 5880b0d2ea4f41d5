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
#include "batch/pca_mask.hpp"
#include "vitreg/image.hpp"
#include "vitreg/preprocess.hpp"
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

namespace {

double dot(const double* a, const float* b, int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

}  // namespace

TEST_CASE("dense reduction (--pca-dims): the reduction equals the reference's, and reconstructs to within the discarded variance") {
    const Model m = Model::load(fixture("models/dinov2_f32.safetensors"));
    const SafetensorsFile f(fixture("dense_views/learned_window.safetensors"));
    const SafetensorsFile want(fixture("dense_views/pca.safetensors"));
    Pixels px;
    px.height = 44;
    px.width = 36;
    px.chw = tensor(f, "input");
    // "both": 128 channels on 99 patches (fewer patches than channels); "last": 64 channels.
    for (const auto& [name, layers] : {std::pair{"both", "0,1"}, {"last", "1"}}) {
        INFO(name);
        const std::string key = name;
        DenseOptions o;
        o.layers = layers;
        o.norm = true;
        o.view.window = 20;
        o.view.stride = 12;
        o.pca_dims = 6;
        const auto got = dense_array(m, px, o);
        const PcaBasis& b = got.basis;
        const int C = b.dim, K = 6;
        REQUIRE(got.shape == std::vector<std::int64_t>{11, 9, K});
        const auto components = tensor(want, key + "_components");
        for (int c = 0; c < K; ++c)  // the same direction with the same sign
            CHECK(dot(b.components.data() + c * C, components.data() + c * C, C) > 1 - 1e-6);
        CHECK(relative_error(std::vector<float>(b.mean.begin(), b.mean.end()), tensor(want, key + "_mean")) < 1e-5);
        CHECK(relative_error(std::vector<float>(b.explained_variance.begin(), b.explained_variance.end()),
                             tensor(want, key + "_explained_variance")) < 1e-5);
        CHECK(relative_error(got.data, tensor(want, key + "_reduced")) < 1e-5);
        const auto ratio = pca_basis_tensors(b).at("explained_variance_ratio").values;
        CHECK(relative_error(ratio, tensor(want, key + "_explained_variance_ratio")) < 1e-5);

        // Reconstruction from the written K channels: its squared error over n - 1 is the variance
        // of the components left out.
        o.pca_dims = 0;
        o.concat = true;
        const auto full = dense_array(m, px, o);
        double error = 0;
        for (int p = 0; p < 99; ++p)
            for (int d = 0; d < C; ++d) {
                double x = b.mean[d];
                for (int c = 0; c < K; ++c) x += got.data[p * K + c] * b.components[c * C + d];
                error += (full.data[p * C + d] - x) * (full.data[p * C + d] - x);
            }
        double kept = 0;
        for (const double v : b.explained_variance) kept += v;
        CHECK(error / 98 == Approx(b.total_variance - kept).epsilon(1e-4));
        CHECK(b.total_variance - kept > 0.01 * b.total_variance);  // something was left out
        for (int c = 0; c < K; ++c)  // orthonormal components
            for (int e = 0; e < K; ++e) {
                double s = 0;
                for (int d = 0; d < C; ++d) s += b.components[c * C + d] * b.components[e * C + d];
                CHECK(s == Approx(c == e ? 1.0 : 0.0).margin(1e-9));
            }
    }
    // Reduced before upsampling: the reduced grid, bilinear to the pixels.
    DenseOptions o;
    o.layers = "0,1";
    o.norm = true;
    o.view.window = 20;
    o.view.stride = 12;
    o.pca_dims = 6;
    o.parse_upsample("image");
    const auto up = dense_array(m, px, o);
    CHECK(up.shape == std::vector<std::int64_t>{44, 36, 6});
    CHECK(relative_error(up.data, tensor(want, "both_reduced_image")) < 1e-5);
    // f16 (what Model.dense returns): the same array narrowed as the writer narrows, no float32 kept.
    o.half = true;
    const auto half = dense_array(m, px, o);
    CHECK(half.data.empty());
    REQUIRE(half.half.size() == up.data.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < up.data.size(); ++i) differ += half.half[i] != float_to_half(up.data[i]);
    CHECK(differ == 0);
    o.half = false;
    // K outside 1..channels is refused with the range.
    o.pca_dims = 129;
    CHECK_THROWS_WITH(o.check(m.config()), Catch::Contains("--pca-dims 129 must be in 1..128"));
    o.pca_dims = -1;
    CHECK_THROWS_WITH(o.check(m.config()), Catch::Contains("must be in 1..128"));
}

TEST_CASE("PCA bases: a joint fit is the fit of the images' patches together; past the rank, still orthonormal") {
    std::vector<float> a(12 * 5), b(8 * 5);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(1.7f * i) + (i % 5 == 2 ? 2.0f * std::cos(0.3f * i) : 0.0f);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(2.3f * i) - 0.5f;
    std::vector<float> both(a);
    both.insert(both.end(), b.begin(), b.end());
    const auto joint = fit_pca_basis({{a.data(), 3, 4}, {b.data(), 2, 4}}, 5, 3);
    const auto one = fit_pca_basis({{both.data(), 5, 4}}, 5, 3);
    CHECK(joint.patches == 20);
    for (std::size_t i = 0; i < joint.components.size(); ++i) CHECK(joint.components[i] == Approx(one.components[i]).margin(1e-12));
    for (int c = 0; c < 3; ++c) CHECK(joint.explained_variance[c] == Approx(one.explained_variance[c]));
    // 3 patches have rank 2: a third component carries no variance and is still a unit vector
    // orthogonal to the others.
    const auto few = fit_pca_basis({{a.data(), 1, 3}}, 5, 4);
    CHECK(few.explained_variance[2] == Approx(0).margin(1e-12));
    for (int c = 0; c < 4; ++c)
        for (int e = 0; e < 4; ++e) {
            double s = 0;
            for (int d = 0; d < 5; ++d) s += few.components[c * 5 + d] * few.components[e * 5 + d];
            CHECK(s == Approx(c == e ? 1.0 : 0.0).margin(1e-9));
        }
    CHECK_THROWS_WITH(fit_pca_basis({{a.data(), 1, 1}}, 5, 2), Catch::Contains("at least 2 patches"));
}

TEST_CASE("foreground masks (--pca-mask): a patch is foreground when half its pixels are, through the image's resize and crop") {
    TempDir dir;
    // Source 20x20, resized to 40x40, cropped at (4, 4) to the 32x32 model input: 4x4 cells of 8 px.
    Geometry g;
    g.source_width = g.source_height = 20;
    g.resized_width = g.resized_height = 40;
    g.crop_left = g.crop_top = 4;
    g.width = g.height = 32;
    const auto left_of = [&](int columns, const std::string& file) {  // source columns < `columns` foreground
        std::vector<std::uint8_t> rgb(20 * 20 * 3, 0);
        for (int y = 0; y < 20; ++y)
            for (int x = 0; x < columns; ++x) rgb[(y * 20 + x) * 3 + 1] = 255;
        write_png_rgb(dir / file, 20, 20, rgb.data());
        ForegroundMask m;
        m.path = dir / file;
        return batch::foreground_cells(m, "image.jpg", g, 4, 4);
    };
    // Source x < 9: model-input x + 4.5 < 18, x <= 13: 6 of cell 1's 8 columns; x < 7: 2 of 8.
    const auto wide = left_of(9, "wide.png"), narrow = left_of(7, "narrow.png");
    for (int p = 0; p < 16; ++p) {
        CHECK(wide[p] == (p % 4 <= 1 ? 1 : 0));
        CHECK(narrow[p] == (p % 4 == 0 ? 1 : 0));
    }
    // A mask of the grid's size is the cells as they are; a folder gives <stem>.png per input.
    ForegroundMask cells;
    cells.width = cells.height = 4;
    cells.pixels = {1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    CHECK(batch::foreground_cells(cells, "x", g, 4, 4) == cells.pixels);
    make_dirs(dir / "masks");
    write_bytes(dir / "masks/image.png", read_bytes(dir / "wide.png"));
    ForegroundMask folder;
    folder.path = dir / "masks";
    CHECK(batch::foreground_cells(folder, "/photos/image.jpg", g, 4, 4) == wide);
    CHECK_THROWS_WITH(batch::foreground_cells(folder, "/photos/other.jpg", g, 4, 4),
                      Catch::Contains("no mask") && Catch::Contains("other.png") && Catch::Contains("/photos/other.jpg"));
    // Refused: another size, too few foreground patches, unreadable.
    cells.width = 5;
    cells.pixels.assign(20, 1);
    CHECK_THROWS_WITH(batch::foreground_cells(cells, "x", g, 4, 4), Catch::Contains("is 5x4, not the size of x"));
    cells.width = cells.height = 4;
    cells.pixels.assign(16, 0);
    cells.pixels[3] = cells.pixels[5] = 1;
    CHECK_THROWS_WITH(batch::foreground_cells(cells, "x", g, 4, 4), Catch::Contains("fewer than 3 foreground patches"));
    write_bytes(dir / "broken.png", "not a png");
    ForegroundMask broken;
    broken.path = dir / "broken.png";
    CHECK_THROWS_AS(batch::foreground_cells(broken, "x", g, 4, 4), vitreg::Error);
}

TEST_CASE("dense --pca foreground --pca-mask: the masked picture, a missing mask the input's failure; --pca-dims files") {
    TempDir dir;
    std::string ppm = "P6\n56 56\n255\n";
    for (int y = 0; y < 56; ++y)
        for (int x = 0; x < 56; ++x) ppm += std::string(3, static_cast<char>((x * 7 + y * 3) % 256));
    write_bytes(dir / "a.ppm", ppm);
    write_bytes(dir / "b.ppm", ppm);
    make_dirs(dir / "masks");
    std::vector<std::uint8_t> rgb(56 * 56 * 3, 0);  // the left half foreground
    for (int y = 0; y < 56; ++y)
        for (int x = 0; x < 28; ++x) rgb[(y * 56 + x) * 3] = 1;
    write_png_rgb(dir / "masks/a.png", 56, 56, rgb.data());
    const Model m = Model::load(resolve_model_path("vitreg-untrained-s14-d192-reg4"));
    DenseOptions o;
    o.out_dir = dir / "out";
    o.resize = ResizeSpec::parse("none");
    o.pca = o.pca_foreground = true;
    o.pca_mask.path = dir / "masks";
    o.pca_dims = 4;
    const auto s = dense_features(m, {dir / "a.ppm", dir / "b.ppm"}, o);
    CHECK(s.ok == 1);
    CHECK(s.failed == 1);
    std::ifstream man(o.out_dir + "/manifest.jsonl");
    std::string line;
    std::getline(man, line);
    const auto row = nlohmann::json::parse(line);
    CHECK(row["shape"] == nlohmann::json::array({4, 4, 4}));
    CHECK(row["pca_basis"] == "0.pca_basis.safetensors");
    std::getline(man, line);
    CHECK_THAT(nlohmann::json::parse(line)["error"].get<std::string>(), Catch::Contains("no mask") && Catch::Contains("b.png"));
    const SafetensorsFile basis(o.out_dir + "/0.pca_basis.safetensors");
    CHECK(tensor(basis, "components").size() == 4u * 192);
    CHECK(tensor(basis, "mean").size() == 192u);
    // The picture's right half (outside the mask, away from the edge's blend) is dimmed.
    const Image picture = decode_image(o.out_dir + "/0.pca.png");
    REQUIRE(picture.width == 112);
    int bright = 0;
    for (int y = 0; y < 56; ++y)
        for (int x = 56 + 35; x < 112; ++x)
            for (int ch = 0; ch < 3; ++ch) bright += picture.rgb[(y * 112 + x) * 3 + ch] > 255 * kBackgroundDim + 1;
    CHECK(bright == 0);
    // A mask is pca_foreground's mask: the cells of its own threshold, given as a grid-sized mask,
    // draw the same picture byte for byte as no mask does.
    DenseOptions concat;
    concat.concat = true;
    const Pixels px = load_pixels(dir / "a.ppm", ResizeSpec::parse("none"), m.config(), ImageLimits{});
    const auto features = dense_array(m, px, concat);
    const auto own = pca_foreground(PatchFeatures{features.data.data(), 4, 4}, 192).foreground;
    std::vector<std::uint8_t> cells(4 * 4 * 3);
    for (int p = 0; p < 16; ++p) cells[p * 3 + 2] = own[p] ? 255 : 0;
    write_png_rgb(dir / "own.png", 4, 4, cells.data());
    DenseOptions plain;
    plain.resize = o.resize;
    plain.pca = plain.pca_foreground = true;
    plain.out_dir = dir / "unmasked";
    CHECK(dense_features(m, {dir / "a.ppm"}, plain).ok == 1);
    plain.out_dir = dir / "masked";
    plain.pca_mask.path = dir / "own.png";
    CHECK(dense_features(m, {dir / "a.ppm"}, plain).ok == 1);
    CHECK(read_bytes(dir / "masked/0.pca.png") == read_bytes(dir / "unmasked/0.pca.png"));
    CHECK(read_bytes(dir / "masked/0.pca.png") != read_bytes(o.out_dir + "/0.pca.png"));  // another mask, another picture
    // A mask without --pca foreground is refused before anything runs.
    o.pca_foreground = false;
    CHECK_THROWS_WITH(o.check(m.config()), Catch::Contains("--pca-mask") && Catch::Contains("--pca foreground"));
}
