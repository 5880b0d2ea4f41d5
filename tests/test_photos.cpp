// The same pixels as the users' PyTorch pipelines, 0 levels apart: real files of every format
// written by Debian's PIL, and what PIL and torchvision make of them
// (tests/fixtures/make_photo_fixtures.py, docs/design.md, "Pixel pipelines").
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "vitreg/config.hpp"
#include "vitreg/image.hpp"
#include "io/pil_resize.hpp"
#include "vitreg/preprocess.hpp"

using namespace vitreg;
using vitreg::test::fixture;

namespace {

const nlohmann::json& photo_cases() {
    static const nlohmann::json j = [] {
        std::ifstream in(fixture("photos/cases.json"));
        return nlohmann::json::parse(in);
    }();
    return j;
}

std::string photo(const nlohmann::json& rel) { return fixture("photos/" + rel.get<std::string>()); }

// The expected images are 8-bit RGB PNGs: decoded losslessly.
Image expected(const nlohmann::json& rel) { return decode_image(photo(rel)); }

// How many bytes differ, and by how much at most (so a failure says how far off it is).
struct Difference {
    std::size_t bytes = 0;
    int largest = 0;
};
Difference compare(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    Difference d;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        if (a[i] != b[i]) {
            ++d.bytes;
            d.largest = std::max(d.largest, std::abs(int(a[i]) - int(b[i])));
        }
    return d;
}

void check_same(const Image& got, const Image& want, const std::string& what) {
    INFO(what);
    REQUIRE(got.width == want.width);
    REQUIRE(got.height == want.height);
    const Difference d = compare(got.rgb, want.rgb);
    INFO("bytes that differ: " << d.bytes << ", by at most " << d.largest << " levels");
    CHECK(d.bytes == 0);
}

ResizeFilter filter_of(const nlohmann::json& c) { return parse_resize_filter(c.at("filter").get<std::string>()); }

}  // namespace

TEST_CASE("every file decodes to PIL's Image.open(f).convert(\"RGB\"), byte for byte", "[photos]") {
    const auto& files = photo_cases().at("files");
    REQUIRE(files.size() >= 30);
    for (const auto& f : files) {
        const std::string path = photo(f.at("file"));
        const Image img = decode_image(path);
        check_same(img, expected(f.at("decode")), path);
        CHECK(img.mode == f.at("mode").get<std::string>());
        CHECK(img.width == f.at("size")[0].get<int>());
        CHECK(img.height == f.at("size")[1].get<int>());
        if (f.contains("decode_exif")) {
            DecodeOptions o;
            o.exif_transpose = true;
            check_same(decode_image(path, o), expected(f.at("decode_exif")), path + " with --exif-transpose");
        }
    }
}

TEST_CASE("PIL's Image.resize, every filter, bit for bit", "[photos]") {
    const auto& resizes = photo_cases().at("resize");
    REQUIRE(resizes.size() >= 100);
    for (const auto& c : resizes) {
        const Image src = decode_image(photo(c.at("source")));
        Bands in{src.width, src.height, 3, src.rgb};
        const int w = c.at("size")[0], h = c.at("size")[1];
        Image got;
        got.width = w;
        got.height = h;
        got.rgb = pil_resize(in, w, h, filter_of(c)).data;
        check_same(got, expected(c.at("expected")), c.at("expected").get<std::string>());
    }
}

TEST_CASE("resizing only the crop gives the bytes of the whole resize, cropped", "[photos]") {
    const Image src = decode_image(fixture("photos/files/jpeg_420_67x45.jpg"));
    const Bands in{src.width, src.height, 3, src.rgb};
    for (auto f : {ResizeFilter::Bicubic, ResizeFilter::Lanczos, ResizeFilter::Nearest, ResizeFilter::Box}) {
        const Bands whole = pil_resize(in, 101, 37, f);
        const Bands part = pil_resize(in, 101, 37, f, {13, 5, 60, 29});
        REQUIRE(part.data.size() == std::size_t(60) * 29 * 3);
        std::size_t differ = 0;
        for (int y = 0; y < 29; ++y)
            for (int x = 0; x < 60 * 3; ++x)
                differ += part.data[std::size_t(y) * 60 * 3 + x] != whole.data[(std::size_t(y + 5) * 101 + 13) * 3 + x];
        CHECK(differ == 0);
    }
}

TEST_CASE("each pipeline's resize and crop: torchvision, timm, HF and open_clip", "[photos]") {
    const auto& pipelines = photo_cases().at("pipelines");
    REQUIRE(pipelines.size() >= 100);
    int hf = 0, timm = 0, open_clip = 0;
    for (const auto& c : pipelines) {
        const std::string name = c.at("expected").get<std::string>() + " (" + c.at("pipeline").get<std::string>() + ")";
        INFO(name);
        ResizeSpec spec;
        spec.pipeline = parse_pixel_pipeline(c.at("pipeline").get<std::string>());
        spec.filter = filter_of(c);
        spec.eval_crop = c.at("crop");
        spec.eval_resize = c.at("resize");
        if (c.contains("crop_pct")) {  // timm: the short side comes from crop_pct, as Config computes it
            Config cfg;
            cfg.input_size = spec.eval_crop;
            cfg.crop_pct = c.at("crop_pct");
            CHECK(cfg.eval_resize() == spec.eval_resize);
            ++timm;
        }
        hf += *spec.pipeline == PixelPipeline::HF;
        open_clip += *spec.pipeline == PixelPipeline::OpenClip;
        DecodeOptions o = decode_options(spec, 4, ImageLimits{}, name);
        const Image src = decode_image(photo(c.at("source")), o);
        const Geometry g = plan_geometry(src.width, src.height, spec, 4, name);
        CHECK(g.resized_width == c.at("resized_size")[0].get<int>());
        CHECK(g.resized_height == c.at("resized_size")[1].get<int>());
        CHECK(g.crop_left == c.at("crop_offset")[0].get<int>());
        CHECK(g.crop_top == c.at("crop_offset")[1].get<int>());
        check_same(resize_and_crop(src, spec, g), expected(c.at("expected")), name);
        if (c.contains("tensor")) {  // torchvision's ToTensor + Normalize(ImageNet), float32 bit for bit
            std::ifstream in(photo(c.at("tensor")), std::ios::binary);
            std::vector<float> want(std::size_t(3) * g.width * g.height);
            in.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(float)));
            REQUIRE(in.gcount() == static_cast<std::streamsize>(want.size() * sizeof(float)));
            const Pixels px = preprocess(src, spec, 4, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, name);
            REQUIRE(px.chw.size() == want.size());
            CHECK(std::memcmp(px.chw.data(), want.data(), want.size() * sizeof(float)) == 0);
        }
    }
    CHECK(hf >= 30);
    CHECK(timm >= 3);
    CHECK(open_clip >= 30);
}

TEST_CASE("draft decoding (--decode draft) is PIL's Image.draft: libjpeg's reduced DCT scale", "[photos]") {
    const auto& drafts = photo_cases().at("draft");
    REQUIRE(drafts.size() >= 10);
    for (const auto& c : drafts) {
        const std::string name = c.at("expected").get<std::string>();
        DecodeOptions o;
        const int rw = c.at("request")[0], rh = c.at("request")[1];
        o.draft = [rw, rh](int, int) { return std::pair{rw, rh}; };
        const Image img = decode_image(photo(c.at("source")), o);
        CHECK(img.draft_scale == c.at("scale").get<int>());
        check_same(img, expected(c.at("expected")), name);
    }
}
