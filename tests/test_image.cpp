// Decoding every supported format to 8-bit RGB, preprocessing against the reference, and
// bad files failing with their name and reason.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "../src/io/stb_guards.hpp"  // the allocation cap's statistics
#include "test_support.hpp"
#include "vitreg/error.hpp"
#include "vitreg/image.hpp"
#include "vitreg/preprocess.hpp"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

using namespace vitreg;
using namespace vitreg::test;

namespace {

const std::array<float, 3> kMean{0.485f, 0.456f, 0.406f}, kStd{0.229f, 0.224f, 0.225f};

// A 9×7 test pattern with `channels` channels.
std::vector<std::uint8_t> pattern(int channels) {
    std::vector<std::uint8_t> px(9 * 7 * channels);
    for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
    return px;
}

std::uint32_t crc32_of(const std::string& bytes) {
    std::uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char c : bytes) {
        crc ^= c;
        for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

// A PNG that claims width × height (RGB, `depth` bits) but holds no pixel data worth the name.
std::string png_header_only(std::uint32_t width, std::uint32_t height, char depth = 8) {
    auto be = [](std::uint32_t v) {
        return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    };
    std::string ihdr = "IHDR" + be(width) + be(height) + depth + std::string("\x02\x00\x00\x00", 4);
    return std::string("\x89PNG\r\n\x1a\n", 8) + be(13) + ihdr + be(crc32_of(ihdr));
}

std::string regression(const std::string& name) { return std::string(VITREG_FUZZ_DIR) + "/regressions/image/" + name; }

// What decoding a file costs, measured in a child process so that an earlier peak of this one
// cannot hide it: the child's peak resident memory (wait4) over its own at the fork, and the time.
struct DecodeCost {
    std::string outcome;  // the ImageError's message, or "decoded"
    double growth_mb = 0;
    double seconds = 0;
};

DecodeCost decode_in_child(const std::string& path) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        struct rusage self {};
        ::getrusage(RUSAGE_SELF, &self);
        std::string outcome = "decoded";
        try {
            (void)decode_image(path);
        } catch (const ImageError& e) {
            outcome = e.what();
        }
        const long base_kb = self.ru_maxrss;
        bool ok = ::write(fds[1], &base_kb, sizeof base_kb) == static_cast<ssize_t>(sizeof base_kb) &&
                  ::write(fds[1], outcome.data(), outcome.size()) == static_cast<ssize_t>(outcome.size());
        ::_exit(ok ? 0 : 1);
    }
    ::close(fds[1]);
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    struct rusage child {};
    REQUIRE(::wait4(pid, &status, 0, &child) == pid);
    DecodeCost cost;
    cost.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    REQUIRE(got.size() >= sizeof(long));
    long base_kb = 0;
    std::memcpy(&base_kb, got.data(), sizeof base_kb);
    cost.outcome = got.substr(sizeof base_kb);
    cost.growth_mb = (child.ru_maxrss - base_kb) / 1024.0;
    return cost;
}

}  // namespace

namespace {

// --resample torch: the float path, F.interpolate(bicubic, antialias=True) as the reference runs it
// (PIL's resize, the default, is checked against PIL itself in test_photos.cpp).
ResizeSpec torch_spec(const std::string& text) {
    ResizeSpec r = ResizeSpec::parse(text);
    r.resampler = Resampler::Torch;
    return r;
}

}  // namespace

TEST_CASE("the float resampler (--resample torch): the eval transform matches the reference (resize 256 bicubic antialias, crop 224)") {
    const SafetensorsFile f(fixture("preprocess.safetensors"));
    const Image img = decode_image(fixture("images/smooth_90x120.png"));
    REQUIRE(img.width == 120);
    REQUIRE(img.height == 90);
    Geometry g;
    const Pixels px = preprocess(img, torch_spec("eval"), 14, kMean, kStd, "smooth", &g);
    CHECK(g.resized_width == std::stoi(f.metadata().at("eval_resize_width")));
    CHECK(g.resized_height == std::stoi(f.metadata().at("eval_resize_height")));
    CHECK(g.crop_left == std::stoi(f.metadata().at("eval_crop_left")));  // 58.5 rounds to even
    CHECK(g.crop_top == std::stoi(f.metadata().at("eval_crop_top")));
    CHECK(relative_error(px.chw, tensor(f, "eval")) < 1e-5);
}

TEST_CASE("the float resampler (--resample torch): long:N resizes the long side and rounds both down to whole patches") {
    const SafetensorsFile f(fixture("preprocess.safetensors"));
    const Image img = decode_image(fixture("images/smooth_90x120.png"));
    for (const std::string n : {"56", "75"}) {
        INFO("long:" << n);
        const Pixels px = preprocess(img, torch_spec("long:" + n), 14, kMean, kStd);
        CHECK(px.width == std::stoi(f.metadata().at("long_" + n + "_width")));
        CHECK(px.height == std::stoi(f.metadata().at("long_" + n + "_height")));
        CHECK(relative_error(px.chw, tensor(f, "long_" + n)) < 1e-5);
    }
}

TEST_CASE("resize specs: none crops right/bottom, WxH and short:N") {
    const Image img = decode_image(fixture("images/smooth_90x120.png"));
    const Pixels none = preprocess(img, ResizeSpec::parse("none"), 14, kMean, kStd);
    CHECK(none.width == 112);
    CHECK(none.height == 84);
    // No resampling: the top-left pixel is the source's, normalized.
    CHECK(none.chw[0] == Approx((img.rgb[0] / 255.0 - 0.485) / 0.229).epsilon(1e-5));
    const Pixels exact = preprocess(img, ResizeSpec::parse("28x42"), 14, kMean, kStd);
    CHECK(exact.width == 28);
    CHECK(exact.height == 42);
    const Pixels s = preprocess(img, ResizeSpec::parse("short:50"), 14, kMean, kStd);
    CHECK(s.height == 42);  // 50 → 42
    CHECK(s.width == 56);   // 66 → 56
    CHECK_THROWS_AS(ResizeSpec::parse("long:"), UsageError);
    CHECK_THROWS_AS(ResizeSpec::parse("12y4"), UsageError);
    CHECK_THROWS_WITH(preprocess(img, ResizeSpec::parse("30x28"), 14, kMean, kStd), Catch::Contains("multiples of the patch"));
    CHECK_THROWS_WITH(preprocess(img, ResizeSpec::parse("long:10"), 14, kMean, kStd, "tiny.png"),
                      Catch::Contains("tiny.png") && Catch::Contains("no whole 14-pixel patch"));
}

TEST_CASE("a 16-bit grayscale PNG decodes as PIL converts its mode I: values clipped at 255") {
    const SafetensorsFile f(fixture("preprocess.safetensors"));
    const auto want = tensor(f, "gray16_values");
    const Image img = decode_image(fixture("images/gray16_20x10.png"));
    REQUIRE(img.width == 20);
    REQUIRE(img.height == 10);
    for (std::size_t i = 0; i < want.size(); ++i) {
        CHECK(img.rgb[3 * i] == static_cast<int>(want[i]));
        CHECK(img.rgb[3 * i + 2] == static_cast<int>(want[i]));
    }
}

TEST_CASE("gray, RGBA, BMP, TGA, JPEG and PNM all come out as 8-bit RGB") {
    TempDir dir;
    const auto rgb = pattern(3), gray = pattern(1), rgba = pattern(4);
    REQUIRE(stbi_write_png((dir / "g.png").c_str(), 9, 7, 1, gray.data(), 9));
    REQUIRE(stbi_write_png((dir / "a.png").c_str(), 9, 7, 4, rgba.data(), 9 * 4));
    REQUIRE(stbi_write_bmp((dir / "c.bmp").c_str(), 9, 7, 3, rgb.data()));
    REQUIRE(stbi_write_tga((dir / "c.tga").c_str(), 9, 7, 3, rgb.data()));
    REQUIRE(stbi_write_jpg((dir / "c.jpg").c_str(), 9, 7, 3, rgb.data(), 95));
    write_bytes(dir / "c.ppm", "P6\n9 7\n255\n" + std::string(rgb.begin(), rgb.end()));

    const Image g = decode_image(dir / "g.png");
    CHECK(g.rgb[3 * 5 + 1] == gray[5]);
    const Image a = decode_image(dir / "a.png");
    CHECK(a.rgb[3 * 5 + 2] == rgba[4 * 5 + 2]);  // alpha dropped, colour kept
    for (const char* lossless : {"c.bmp", "c.tga", "c.ppm"}) {
        INFO(lossless);
        const Image img = decode_image(dir / lossless);
        CHECK(img.width == 9);
        CHECK(img.height == 7);
        CHECK(img.rgb == rgb);
    }
    const Image j = decode_image(dir / "c.jpg");
    CHECK(j.width == 9);
    CHECK(j.rgb.size() == rgb.size());

    // The same BMP stored top-down: a negative height and the rows in reading order.
    std::string bmp = read_bytes(dir / "c.bmp");
    std::uint32_t offset = 0;
    std::memcpy(&offset, bmp.data() + 10, 4);
    const std::int32_t top_down = -7;
    std::memcpy(&bmp[22], &top_down, 4);
    const std::size_t stride = (9 * 3 + 3) / 4 * 4;
    std::string rows = bmp.substr(offset, 7 * stride);
    for (int y = 0; y < 7; ++y) bmp.replace(offset + y * stride, stride, rows.substr((6 - y) * stride, stride));
    write_bytes(dir / "top_down.bmp", bmp);
    const Image t = decode_image(dir / "top_down.bmp");
    CHECK(t.width == 9);
    CHECK(t.height == 7);
    CHECK(t.rgb == rgb);
}

TEST_CASE("bad image files fail with the file name and the reason") {
    TempDir dir;
    const std::string png = read_bytes(fixture("images/smooth_90x120.png"));
    write_bytes(dir / "empty.png", "");
    write_bytes(dir / "text.jpg", "this is not an image at all");
    write_bytes(dir / "cut.png", png.substr(0, png.size() / 2));
    const auto rgb = pattern(3);
    REQUIRE(stbi_write_jpg((dir / "whole.jpg").c_str(), 9, 7, 3, rgb.data(), 95));
    const std::string jpg = read_bytes(dir / "whole.jpg");
    write_bytes(dir / "cut.jpg", jpg.substr(0, jpg.size() - 40));
    write_bytes(dir / "bomb.png", png_header_only(30000, 30000));

    CHECK_THROWS_WITH(decode_image(dir / "empty.png"), Catch::Contains("empty.png") && Catch::Contains("empty file"));
    CHECK_THROWS_WITH(decode_image(dir / "text.jpg"), Catch::Contains("text.jpg") && Catch::Contains("not a decodable image"));
    CHECK_THROWS_WITH(decode_image(dir / "cut.png"), Catch::Contains("cut.png"));
    CHECK_THROWS_WITH(decode_image(dir / "cut.jpg"), Catch::Contains("truncated JPEG"));
    CHECK_THROWS_WITH(decode_image(dir / "bomb.png"), Catch::Contains("30000x30000") && Catch::Contains("over the limit"));
    CHECK_THROWS_WITH(decode_image(dir / "missing.png"), Catch::Contains("missing.png") && Catch::Contains("No such file"));
    CHECK_THROWS_WITH(decode_image(dir.path()), Catch::Contains("is a directory"));
}

TEST_CASE("JPEG: a huge header and a progressive scan bomb are refused, memory and time bounded") {
    TempDir dir;
    // A real file whose frame header (SOF) claims 60000 x 60000: refused from the header alone.
    std::string jpg = read_bytes(fixture("photos/files/jpeg_420_67x45.jpg"));
    const std::size_t sof = jpg.find("\xff\xc0");
    REQUIRE(sof != std::string::npos);
    for (std::size_t at : {sof + 5, sof + 7}) jpg[at] = '\xea', jpg[at + 1] = '\x60';  // height, width 60000
    write_bytes(dir / "huge.jpg", jpg);
    const DecodeCost huge = decode_in_child(dir / "huge.jpg");
    CHECK_THAT(huge.outcome, Catch::Contains("huge.jpg: image is 60000x60000, over the limit"));
    CHECK(huge.growth_mb < 50);
    // A progressive file whose last scan repeats 1200 times: each repeat is another pass over the
    // coefficients (libjpeg only warns), so the count is bounded.
    const std::string prog = read_bytes(fixture("photos/files/jpeg_progressive_420_71x53.jpg"));
    const std::size_t last_scan = prog.rfind("\xff\xda"), eoi = prog.rfind("\xff\xd9");
    REQUIRE(last_scan < eoi);
    std::string bomb = prog.substr(0, last_scan);
    for (int i = 0; i < 1200; ++i) bomb += prog.substr(last_scan, eoi - last_scan);
    bomb += prog.substr(eoi);
    write_bytes(dir / "scans.jpg", bomb);
    const DecodeCost scans = decode_in_child(dir / "scans.jpg");
    CHECK_THAT(scans.outcome, Catch::Contains("scans.jpg: corrupt JPEG (more than 1000 progressive scans)"));
    CHECK(scans.seconds < 5);
}

TEST_CASE("a PNG chunk longer than the file is refused before stb reserves it") {
    const std::string path = regression("png-idat-declares-2gb.png");  // 6x4; IDAT declares 2^31 - 1 bytes
    const std::string refusal =
        path + ": cannot decode (truncated or corrupt PNG: chunk IDAT declares 2147483647 bytes, 10 remain)";
    CHECK_THROWS_WITH(decode_image(path), refusal);
    CHECK(last_stb_allocations().largest_request == 0);  // stb never ran
    const DecodeCost cost = decode_in_child(path);
    INFO("peak growth " << cost.growth_mb << " MB, " << cost.seconds << " s");
    CHECK(cost.outcome == refusal);
    CHECK(cost.growth_mb < 100);
    CHECK(cost.seconds < 1);

    // Over PNG's own limit of 2^31 - 1, and a chunk header cut short.
    std::string png = png_header_only(6, 4) + std::string("\xff\xff\xff\xffIDAT", 8);
    CHECK_THROWS_WITH(decode_image_memory(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "over.png"),
                      "over.png: cannot decode (corrupt PNG: chunk IDAT declares 4294967295 bytes, over the format's "
                      "limit of 2147483647)");
    png = png_header_only(6, 4) + std::string("\0\0\0", 3);
    CHECK_THROWS_WITH(decode_image_memory(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "cut.png"),
                      "cut.png: cannot decode (truncated PNG: 3 bytes after the last chunk, a chunk header needs 8)");
}

TEST_CASE("a PNG decompression bomb is refused at the allocation cap") {
    const std::string path = regression("png-zlib-bomb-1x1.png");  // 1x1; its IDAT inflates to 200 MB
    const std::string refusal =
        path + ": cannot decode (its data would need more memory than a 1x1 image can: a decompression bomb?)";
    CHECK_THROWS_WITH(decode_image(path), refusal);
    const StbAllocStats stats = last_stb_allocations();
    CHECK(stats.refused);
    CHECK(stats.cap > 0);
    CHECK(stats.cap < (3u << 20));  // 16 x 33 x 33 + 2 x the file + 1 MiB
    CHECK(stats.largest_request > stats.cap);
    CHECK(stats.largest_granted <= stats.cap);
    const DecodeCost cost = decode_in_child(path);
    INFO("peak growth " << cost.growth_mb << " MB, " << cost.seconds << " s");
    CHECK(cost.outcome == refusal);
    CHECK(cost.growth_mb < 100);
    CHECK(cost.seconds < 1);

    // A real image stays well under its cap.
    const Image img = decode_image(fixture("images/smooth_90x120.png"));
    CHECK(img.width == 120);
    const StbAllocStats good = last_stb_allocations();
    CHECK_FALSE(good.refused);
    CHECK(good.largest_granted > 90 * 120 * 3);
    CHECK(good.largest_granted <= good.cap);
}

TEST_CASE("the allocation cap holds only on its own thread and only while it lives") {
    {
        StbAllocCap cap(1000);
        CHECK(stb_malloc(1001) == nullptr);
        void* small = stb_malloc(1000);
        CHECK(small != nullptr);
        CHECK(stb_realloc(small, 2000) == nullptr);  // refused: the old block stays the caller's
        stb_free(small);
        bool other_thread = false;
        std::thread([&] {
            void* p = stb_malloc(1 << 20);
            other_thread = p != nullptr;
            stb_free(p);
        }).join();
        CHECK(other_thread);
        CHECK(cap.refused());
    }
    void* p = stb_malloc(1 << 20);
    CHECK(p != nullptr);
    stb_free(p);
}

TEST_CASE("an uncompressed TGA cut short is refused; a whole one decodes") {
    const std::string path = regression("tga-uncompressed-cut-short.tga");  // 64x64 RGB, 100 bytes of pixels
    CHECK_THROWS_WITH(decode_image(path), path + ": truncated TGA (64x64 pixels of 3 bytes need 12288, 100 present)");

    TempDir dir;
    const auto rgb = pattern(3);
    std::string tga("\0\0\x02\0\0\0\0\0\0\0\0\0\x09\0\x07\0\x18\x20", 18);  // 9x7, 24 bits, top-left first
    for (std::size_t i = 0; i < rgb.size(); i += 3) tga += {char(rgb[i + 2]), char(rgb[i + 1]), char(rgb[i])};
    write_bytes(dir / "whole.tga", tga);
    write_bytes(dir / "cut.tga", tga.substr(0, tga.size() - 1));
    const Image img = decode_image(dir / "whole.tga");
    CHECK(img.width == 9);
    CHECK(img.height == 7);
    CHECK(img.rgb == rgb);
    CHECK_THROWS_WITH(decode_image(dir / "cut.tga"),
                      dir / "cut.tga" + ": truncated TGA (9x7 pixels of 3 bytes need 189, 188 present)");

    // Colour-mapped and RLE files, which stb reads past their end as zeros: a 25-byte file declaring
    // 20728x1806 pixels (found by fuzz_disparity) took seconds. A whole RLE file still decodes.
    const std::string slow = std::string(VITREG_FUZZ_DIR) + "/regressions/disparity/tga-colour-mapped-25-bytes-slow.tga";
    CHECK_THROWS_WITH(decode_image(slow), Catch::Contains("truncated TGA (20728x1806 pixels of 1 bytes need 37434896 with "
                                                          "the colour map, 7 present)"));
    const std::string cut_header = std::string(VITREG_FUZZ_DIR) + "/regressions/disparity/tga-17-byte-header-slow-9b1649.tga";
    CHECK_THROWS_WITH(decode_image(cut_header), Catch::Contains("truncated TGA (4404x20494 pixels of 1 bytes need 90255704 "
                                                                "with the colour map, 0 present)"));
    REQUIRE(stbi_write_tga((dir / "rle.tga").c_str(), 9, 7, 3, rgb.data()));  // RLE: stb writes it by default
    CHECK(decode_image(dir / "rle.tga").rgb == rgb);
    std::string rle("\0\0\x0a\0\0\0\0\0\0\0\0\0\x00\x04\x00\x04\x18\x20", 18);  // 1024x1024 RLE, 24 bits
    write_bytes(dir / "rle-cut.tga", rle + std::string(100, '\x7f'));
    CHECK_THROWS_WITH(decode_image(dir / "rle-cut.tga"),
                      dir / "rle-cut.tga" + ": truncated TGA (1024x1024 pixels of 3 bytes need at least 32768, 100 present)");
}

TEST_CASE("formats stb 2.27 cannot be trusted with are refused by name") {
    ImageLimits raised;
    raised.max_pixels = std::int64_t(1) << 32;
    const std::string png = png_header_only(20000, 20000, 16);
    CHECK_THROWS_WITH(decode_image_memory(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "wide16.png", raised),
                      "wide16.png: 16-bit PNG is 20000x20000, over the 357913941 pixels stb can convert to 8 bits");
    const std::string psd = "8BPS" + std::string(40, '\0');
    CHECK_THROWS_WITH(decode_image_memory(reinterpret_cast<const std::uint8_t*>(psd.data()), psd.size(), "layers.psd"),
                      "layers.psd: not a decodable image (PSD and PIC files are not read)");
}
