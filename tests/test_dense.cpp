// Dense features: intermediate blocks against the reference, bilinear upsampling against
// torch, pixel alignment, the PCA view, float16 storage and the linear probe.
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
