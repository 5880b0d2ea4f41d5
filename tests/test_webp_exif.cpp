// WebP decoding against PIL's bytes (fixtures/webp_unit, written by PIL: make.py), hostile WebP
// files failing cleanly, and the EXIF orientation found and applied as PIL does.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "../src/io/decoders.hpp"
#include "test_support.hpp"
#include "vitreg/error.hpp"
#include "vitreg/image.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes fixture_bytes(const std::string& rel) {
    const std::string s = read_bytes(fixture(rel));
    REQUIRE(!s.empty());
    return Bytes(s.begin(), s.end());
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

void append(Bytes& out, const Bytes& more) { out.insert(out.end(), more.begin(), more.end()); }

Bytes le(std::uint64_t v, int n) {
    Bytes b;
    for (int i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    return b;
}
Bytes be(std::uint64_t v, int n) {
    Bytes b;
    for (int i = n - 1; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    return b;
}

// A RIFF chunk: fourcc, little-endian size, payload, a pad byte when the size is odd.
Bytes riff_chunk(const std::string& fourcc, const Bytes& payload) {
    Bytes out = text(fourcc);
    append(out, le(payload.size(), 4));
    append(out, payload);
    if (payload.size() & 1) out.push_back(0);
    return out;
}
Bytes riff_file(const Bytes& chunks) {
    Bytes out = text("RIFF");
    append(out, le(chunks.size() + 4, 4));
    append(out, text("WEBP"));
    append(out, chunks);
    return out;
}

Image webp(const Bytes& b, const std::string& name, const ImageLimits& limits = {}) {
    return decode_webp(b.data(), b.size(), name, limits);
}

// A deterministic byte stream (an LCG) for garbage.
Bytes garbage(std::size_t n, std::uint32_t seed) {
    Bytes b(n);
    for (auto& c : b) {
        seed = seed * 1664525u + 1013904223u;
        c = static_cast<std::uint8_t>(seed >> 24);
    }
    return b;
}

}  // namespace

TEST_CASE("WebP files decode to PIL's RGB bytes, mode and size", "[webp]") {
    const auto expected = fixture_json("webp_unit/expected.json");
    REQUIRE(expected.size() >= 7);
    for (const auto& [name, e] : expected.items()) {
        INFO(name);
        const Bytes file = fixture_bytes("webp_unit/" + name + ".webp");
        const Bytes want = fixture_bytes("webp_unit/" + name + ".rgb");
        REQUIRE(is_webp(file.data(), file.size()));
        Image img = webp(file, name);
        CHECK(img.width == e["width"].get<int>());
        CHECK(img.height == e["height"].get<int>());
        CHECK(img.mode == e["mode"].get<std::string>());
        const int orientation = e["orientation"].get<int>();
        CHECK(exif_orientation(file.data(), file.size()) == orientation);
        if (orientation != 1) {
            apply_exif_orientation(img, orientation);
            CHECK(img.width == e["transposed_width"].get<int>());
            CHECK(img.height == e["transposed_height"].get<int>());
        }
        REQUIRE(img.rgb.size() == want.size());
        CHECK(img.rgb == want);

        // And through decode_image, which picks the decoder by the signature.
        DecodeOptions options;
        options.exif_transpose = true;
        const Image via = decode_image(fixture("webp_unit/" + name + ".webp"), options);
        CHECK(via.width == img.width);
        CHECK(via.height == img.height);
        CHECK(via.rgb == want);
    }
}

TEST_CASE("an animation gives its first frame on a transparent black canvas", "[webp]") {
    // anim_offset's first frame is 8x6 at (4, 2) on a 16x12 canvas.
    const Image img = webp(fixture_bytes("webp_unit/anim_offset.webp"), "anim_offset.webp");
    REQUIRE(img.width == 16);
    REQUIRE(img.height == 12);
    for (int y = 0; y < 12; ++y)
        for (int x = 0; x < 16; ++x) {
            if (x >= 4 && x < 12 && y >= 2 && y < 8) continue;
            const std::size_t at = (std::size_t(y) * 16 + x) * 3;
            CHECK((img.rgb[at] | img.rgb[at + 1] | img.rgb[at + 2]) == 0);
        }
}

TEST_CASE("broken WebP files fail with the file name and the reason", "[webp]") {
    const Bytes lossy = fixture_bytes("webp_unit/lossy.webp");

    SECTION("cut short") {
        const Bytes cut(lossy.begin(), lossy.begin() + lossy.size() / 2);
        CHECK_THROWS_WITH(webp(cut, "cut.webp"), Catch::StartsWith("cut.webp: truncated WebP (its RIFF header declares " +
                                                                   std::to_string(lossy.size()) + " bytes, the file holds " +
                                                                   std::to_string(cut.size()) + ")"));
    }
    SECTION("a RIFF size far past the file") {
        Bytes huge = lossy;
        huge[4] = huge[5] = huge[6] = 0xFF, huge[7] = 0xFE;
        CHECK_THROWS_WITH(webp(huge, "huge.webp"),
                          Catch::StartsWith("huge.webp: truncated WebP (its RIFF header declares 4278190087 bytes"));
    }
    SECTION("a RIFF size of zero") {
        Bytes zero = lossy;
        zero[4] = zero[5] = zero[6] = zero[7] = 0;
        CHECK_THROWS_WITH(webp(zero, "zero.webp"), Catch::StartsWith("zero.webp: corrupt WebP (its RIFF header declares 0 bytes"));
    }
    SECTION("a VP8L header declaring 16383x16383 is refused by its size, before any pixel") {
        // Signature 0x2f, then 14 bits width - 1, 14 bits height - 1, alpha, 3 bits version 0.
        const std::uint32_t bits = 16382u | 16382u << 14;
        Bytes vp8l{0x2f};
        append(vp8l, le(bits, 4));
        append(vp8l, Bytes(16, 0));
        const Bytes file = riff_file(riff_chunk("VP8L", vp8l));
        ImageLimits lowered;
        lowered.max_pixels = 1 << 20;
        CHECK_THROWS_WITH(webp(file, "big.webp", lowered),
                          "big.webp: image is 16383x16383, over the limit of 1048576 pixels");
        CHECK_THROWS_WITH(webp(file, "big.webp"), "big.webp: image is 16383x16383, over the limit of 178956970 pixels");
        CHECK_THROWS_WITH(decode_image_memory(file.data(), file.size(), "big.webp", lowered),
                          Catch::Contains("over the limit of 1048576 pixels"));
    }
    SECTION("an animation's VP8X canvas of 50000x50000 is refused by its size") {
        // (libwebp itself refuses canvases of 2^32 pixels or more.)
        Bytes vp8x{0x02, 0, 0, 0};
        append(vp8x, le(50000 - 1, 3));
        append(vp8x, le(50000 - 1, 3));
        Bytes chunks = riff_chunk("VP8X", vp8x);
        append(chunks, riff_chunk("ANIM", Bytes(6, 0)));
        CHECK_THROWS_WITH(webp(riff_file(chunks), "canvas.webp"),
                          "canvas.webp: image is 50000x50000, over the limit of 178956970 pixels");
    }
    SECTION("garbage after RIFF....WEBP") {
        for (std::uint32_t seed = 1; seed <= 64; ++seed) {
            const Bytes file = riff_file(garbage(8 + seed * 7, seed));
            INFO("seed " << seed);
            CHECK_THROWS_WITH(webp(file, "garbage.webp"), Catch::StartsWith("garbage.webp: corrupt WebP ("));
        }
        // A well-formed chunk whose bitstream is garbage.
        Bytes vp8l{0x2f};
        append(vp8l, le(15u | 15u << 14, 4));
        append(vp8l, garbage(40, 7));
        CHECK_THROWS_WITH(webp(riff_file(riff_chunk("VP8L", vp8l)), "bits.webp"),
                          Catch::StartsWith("bits.webp: corrupt WebP (lossless bitstream:"));
    }
    SECTION("not WebP at all") {
        const Bytes png = text("\x89PNG\r\n\x1a\n");
        CHECK_FALSE(is_webp(png.data(), png.size()));
        CHECK_THROWS_WITH(webp(png, "x.png"), "x.png: not a WebP file");
        const Bytes riff = text("RIFF\x04\0\0\0WAVE");
        CHECK_FALSE(is_webp(riff.data(), riff.size()));
    }
}

TEST_CASE("every cut and every flipped byte of a WebP file decodes or fails cleanly", "[webp]") {
    for (const char* name : {"lossy", "lossless", "lossy_alpha", "anim", "anim_offset", "exif6"}) {
        const Bytes file = fixture_bytes(std::string("webp_unit/") + name + ".webp");
        INFO(name);
        for (std::size_t n = 0; n < file.size(); ++n) {
            const Bytes cut(file.begin(), file.begin() + n);  // its own allocation: ASan sees an over-read
            try {
                (void)webp(cut, "cut.webp");
                FAIL("a cut file decoded: " << n << " bytes");
            } catch (const ImageError&) {
            }
            CHECK(exif_orientation(cut.data(), cut.size()) >= 1);
        }
        int decoded = 0, refused = 0;
        for (std::size_t i = 0; i < file.size(); ++i) {
            for (std::uint8_t flip : {0x01, 0x80, 0xFF}) {
                Bytes bent = file;
                bent[i] ^= flip;
                try {
                    const Image img = webp(bent, "bent.webp");
                    CHECK(img.rgb.size() == std::size_t(img.width) * img.height * 3);
                    ++decoded;
                } catch (const ImageError&) {
                    ++refused;
                }
                const int o = exif_orientation(bent.data(), bent.size());
                CHECK((o >= 1 && o <= 8));
            }
        }
        CHECK(decoded > 0);
        CHECK(refused > 0);
    }
}

namespace {

// A TIFF block whose IFD0 holds `entries` (tag, type, count, 4 bytes of value or offset), then
// `tail`, at offset 8 + 2 + 12 n + 4.
struct Entry {
    std::uint16_t tag, type;
    std::uint32_t count;
    std::uint32_t value;  // a SHORT sits in the first two bytes
};

Bytes tiff(const std::vector<Entry>& entries, bool little, const Bytes& tail = {}, std::int64_t declared = -1,
           std::uint32_t next = 0) {
    const auto n = [&](std::uint64_t v, int k) { return little ? le(v, k) : be(v, k); };
    Bytes out = little ? text("II") : text("MM");
    append(out, n(42, 2));
    append(out, n(8, 4));
    append(out, n(declared >= 0 ? std::uint64_t(declared) : entries.size(), 2));
    for (const Entry& e : entries) {
        append(out, n(e.tag, 2));
        append(out, n(e.type, 2));
        append(out, n(e.count, 4));
        if (e.type == 3 && e.count == 1) {
            append(out, n(e.value, 2));
            append(out, Bytes(2, 0));
        } else {
            append(out, n(e.value, 4));
        }
    }
    append(out, n(next, 4));
    append(out, tail);
    return out;
}
Bytes orientation_tiff(int o, bool little) { return tiff({{0x010F, 2, 4, 0x00414141}, {0x0112, 3, 1, std::uint32_t(o)}}, little); }

Bytes jpeg_with(const std::vector<Bytes>& app1_payloads) {
    Bytes out{0xFF, 0xD8};
    append(out, {0xFF, 0xE0, 0x00, 0x10});  // a JFIF APP0 first, as real files have
    append(out, text(std::string("JFIF\0\x01\x01\0\0\x01\0\x01\0\0", 14)));
    for (const Bytes& p : app1_payloads) {
        append(out, {0xFF, 0xE1});
        append(out, be(p.size() + 2, 2));
        append(out, p);
    }
    append(out, {0xFF, 0xDA, 0x00, 0x02, 0x12, 0x34, 0xFF, 0xD9});
    return out;
}
Bytes exif_app1(const Bytes& tiff_block) {
    Bytes p = text(std::string("Exif\0\0", 6));
    append(p, tiff_block);
    return p;
}

Bytes png_chunk(const std::string& type, const Bytes& data) {
    Bytes out = be(data.size(), 4);
    append(out, text(type));
    append(out, data);
    append(out, Bytes(4, 0));  // CRC: not checked here
    return out;
}
Bytes png_with(const Bytes& exif, bool after_idat) {
    Bytes out = text("\x89PNG\r\n\x1a\n");
    Bytes ihdr = be(3, 4);
    append(ihdr, be(2, 4));
    append(ihdr, {8, 2, 0, 0, 0});
    append(out, png_chunk("IHDR", ihdr));
    if (!after_idat) append(out, png_chunk("eXIf", exif));
    append(out, png_chunk("IDAT", Bytes{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01}));
    if (after_idat) append(out, png_chunk("eXIf", exif));
    append(out, png_chunk("IEND", {}));
    return out;
}

Bytes webp_with(const Bytes& exif, bool exif_flag = true) {
    Bytes vp8x{std::uint8_t(exif_flag ? 0x08 : 0x00), 0, 0, 0};
    append(vp8x, le(2, 3));
    append(vp8x, le(1, 3));
    Bytes chunks = riff_chunk("VP8X", vp8x);
    append(chunks, riff_chunk("VP8 ", Bytes(11, 0)));
    append(chunks, riff_chunk("EXIF", exif));
    return riff_file(chunks);
}

int orientation(const Bytes& b) { return exif_orientation(b.data(), b.size()); }

}  // namespace

TEST_CASE("the EXIF orientation is read from JPEG, PNG and WebP in both byte orders", "[exif]") {
    for (bool little : {true, false}) {
        for (int o = 1; o <= 8; ++o) {
            INFO((little ? "II" : "MM") << " orientation " << o);
            const Bytes t = orientation_tiff(o, little);
            CHECK(orientation(jpeg_with({exif_app1(t)})) == o);
            CHECK(orientation(png_with(t, false)) == o);
            CHECK(orientation(png_with(t, true)) == o);  // PIL reads an eXIf after IDAT too
            CHECK(orientation(webp_with(t)) == o);
            CHECK(orientation(webp_with(exif_app1(t))) == o);  // with the "Exif\0\0" prefix too
        }
    }
    // An XMP APP1 before the EXIF one is passed over; the first EXIF APP1 counts, as in PIL.
    Bytes xmp = text(std::string("http://ns.adobe.com/xap/1.0/\0<x/>", 34));
    CHECK(orientation(jpeg_with({xmp, exif_app1(orientation_tiff(6, true)), exif_app1(orientation_tiff(3, true))})) == 6);
    // The types PIL compares as numbers: LONG, SSHORT, a RATIONAL equal to an integer.
    CHECK(orientation(png_with(tiff({{0x0112, 4, 1, 8}}, false), false)) == 8);
    CHECK(orientation(png_with(tiff({{0x0112, 8, 1, 5}}, true), false)) == 5);
    CHECK(orientation(png_with(tiff({{0x0112, 5, 1, 26}}, true, Bytes{12, 0, 0, 0, 2, 0, 0, 0}), false)) == 6);
    // Two Orientation entries: the later one wins (PIL keeps a dict); of several values, the first.
    CHECK(orientation(png_with(tiff({{0x0112, 3, 1, 3}, {0x0112, 3, 1, 7}}, true), false)) == 7);
    CHECK(orientation(png_with(tiff({{0x0112, 3, 2, 0x00030005}}, true), false)) == 5);
}

TEST_CASE("malformed or missing EXIF data reads as orientation 1", "[exif]") {
    const Bytes good = orientation_tiff(6, true);
    REQUIRE(orientation(png_with(good, false)) == 6);

    // Values outside 1..8, and types PIL never matches (text, bytes).
    for (std::uint32_t v : {0u, 9u, 255u, 0xFFFFu})
        CHECK(orientation(png_with(tiff({{0x0112, 3, 1, v}}, true), false)) == 1);
    CHECK(orientation(png_with(tiff({{0x0112, 2, 2, 0x36}}, true), false)) == 1);  // ASCII "6"
    CHECK(orientation(png_with(tiff({{0x0112, 1, 1, 6}}, true), false)) == 1);     // BYTE
    CHECK(orientation(png_with(tiff({{0x0112, 5, 1, 26}}, true, Bytes{13, 0, 0, 0, 2, 0, 0, 0}), false)) == 1);  // 13/2
    CHECK(orientation(png_with(tiff({{0x0112, 5, 1, 26}}, true, Bytes{6, 0, 0, 0, 0, 0, 0, 0}), false)) == 1);   // 6/0
    CHECK(orientation(png_with(tiff({{0x0112, 99, 1, 6}}, true), false)) == 1);  // an unknown type

    // IFD0's offset past the end of the block.
    Bytes far = good;
    far[4] = 0xF0, far[5] = 0xFF, far[6] = 0xFF, far[7] = 0x7F;
    CHECK(orientation(png_with(far, false)) == 1);
    // IFD0 at the very end (no room for its entry count).
    Bytes end = good;
    end[4] = static_cast<std::uint8_t>(good.size() - 1), end[5] = end[6] = end[7] = 0;
    CHECK(orientation(png_with(end, false)) == 1);
    // A huge entry count with no complete entry in the block.
    CHECK(orientation(png_with(tiff({}, true, Bytes(11, 0), 0xFFFF), false)) == 1);
    // The Orientation entry cut off by the end of the block.
    Bytes cut = good;
    cut.resize(cut.size() - 4 - 3);
    CHECK(orientation(png_with(cut, false)) == 1);
    // A huge value count: its data (at an offset) is not there, which ends PIL's reading.
    CHECK(orientation(png_with(tiff({{0x0112, 3, 0xFFFFFFFFu, 8}}, true), false)) == 1);
    // An entry before it whose data runs past the block stops the reading before Orientation.
    CHECK(orientation(png_with(tiff({{0x010F, 2, 64, 0x1000}, {0x0112, 3, 1, 6}}, true), false)) == 1);
    // An IFD that names itself as the next one, and IFD0 pointing at the header: both end.
    CHECK(orientation(png_with(tiff({{0x010F, 2, 4, 0x00414141}}, true, {}, -1, 8), false)) == 1);
    Bytes self = good;
    self[4] = 0;
    CHECK(orientation(png_with(self, false)) == 1);
    // No TIFF header.
    Bytes wrong = good;
    wrong[0] = 'X';
    CHECK(orientation(png_with(wrong, false)) == 1);
    Bytes not42 = good;
    not42[2] = 43;
    CHECK(orientation(png_with(not42, false)) == 1);
    CHECK(orientation(png_with({}, false)) == 1);

    // JPEG: "Exif\0" with a sixth byte other than 0 (PIL then finds no TIFF header, and reads no
    // later APP1); an APP1 running past the end; EXIF after the start of scan.
    Bytes odd = text(std::string("Exif\0X", 6));
    append(odd, good);
    CHECK(orientation(jpeg_with({odd, exif_app1(good)})) == 1);
    Bytes long_app1 = jpeg_with({exif_app1(good)});
    long_app1.resize(40);
    CHECK(orientation(long_app1) == 1);
    Bytes after_scan = jpeg_with({});
    append(after_scan, {0xFF, 0xE1});
    append(after_scan, be(exif_app1(good).size() + 2, 2));
    append(after_scan, exif_app1(good));
    CHECK(orientation(after_scan) == 1);
    // PNG: a chunk length past the end before eXIf.
    Bytes png = png_with(good, true);
    png[8 + 25 + 3] = 0xFF;  // IDAT's length, low byte
    png[8 + 25 + 0] = 0x7F;
    CHECK(orientation(png) == 1);
    // WebP: without the VP8X EXIF flag libwebp's demuxer (and so PIL) keeps no EXIF chunk; an
    // EXIF chunk longer than the file.
    CHECK(orientation(webp_with(good, false)) == 1);
    Bytes webp_cut = webp_with(good);
    webp_cut.resize(webp_cut.size() - 5);
    CHECK(orientation(webp_cut) == 1);
    // Not an image, and nothing.
    CHECK(orientation(garbage(300, 3)) == 1);
    CHECK(exif_orientation(nullptr, 0) == 1);
    const Bytes tiny{0xFF, 0xD8, 0xFF};
    CHECK(orientation(tiny) == 1);

    // Every cut of every container, each in its own allocation.
    for (const Bytes& whole : {jpeg_with({exif_app1(good)}), png_with(good, false), webp_with(good)}) {
        for (std::size_t n = 0; n < whole.size(); ++n) {
            const Bytes part(whole.begin(), whole.begin() + n);
            const int o = orientation(part);
            CHECK((o == 1 || o == 6));
        }
    }
}

TEST_CASE("apply_exif_orientation transposes as PIL's ImageOps.exif_transpose", "[exif]") {
    // A 3x2 image, pixel k = (k, k + 100, 7k); what PIL's Image.transpose gives for each
    // orientation, as the k of each output pixel in row order (computed with PIL 9.4).
    const std::vector<std::vector<int>> want = {
        {0, 1, 2, 3, 4, 5}, {2, 1, 0, 5, 4, 3}, {5, 4, 3, 2, 1, 0}, {3, 4, 5, 0, 1, 2},
        {0, 3, 1, 4, 2, 5}, {3, 0, 4, 1, 5, 2}, {5, 2, 4, 1, 3, 0}, {2, 5, 1, 4, 0, 3},
    };
    for (int o = 0; o <= 9; ++o) {
        INFO("orientation " << o);
        Image img;
        img.width = 3, img.height = 2;
        for (int k = 0; k < 6; ++k) img.rgb.insert(img.rgb.end(), {std::uint8_t(k), std::uint8_t(k + 100), std::uint8_t(7 * k)});
        apply_exif_orientation(img, o);
        const bool valid = o >= 1 && o <= 8;
        const auto& ks = want[valid ? o - 1 : 0];
        CHECK(img.width == (valid && o >= 5 ? 2 : 3));
        CHECK(img.height == (valid && o >= 5 ? 3 : 2));
        REQUIRE(img.rgb.size() == 18);
        for (int i = 0; i < 6; ++i) {
            CHECK(img.rgb[3 * i] == ks[i]);
            CHECK(img.rgb[3 * i + 1] == ks[i] + 100);
            CHECK(img.rgb[3 * i + 2] == 7 * ks[i]);
        }
    }
}
