// vitreg-viewer's --snapshot draws exactly what the library's render_view draws.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/render/explorer.hpp"
#include "vitreg/image.hpp"
#include "vitreg/probe.hpp"
#include "vitreg/render/label_text.hpp"
#include "vitreg/render/render.hpp"

using namespace vitreg;
using namespace vitreg::test;

TEST_CASE("the viewer's snapshot equals the library's rendering of the same view") {
    TempDir dir;
    const std::string model = fixture("models/sink_reg2_f32.safetensors"), image = fixture("images/smooth_90x120.png");
    const std::string cmd = std::string(VITREG_VIEWER_BIN) + " '" + model + "' '" + image +
                            "' --resize long:40 --layer 1 --head 2 --query patch:1,3 --mode abstention --snapshot '" + (dir / "snap.png") +
                            "' > /dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const Model m = Model::load(model);
    const Config& c = m.config();
    const Pixels px = preprocess(decode_image(image), ResizeSpec::parse("long:40"), c.patch, c.mean, c.std);
    const render::Exploration e(m, "sink_reg2_f32.safetensors", px);
    render::ViewState s;
    s.layer = 1;
    s.head = 2;
    s.query = TokenRef::parse("patch:1,3").token_index(c.registers, px.height / c.patch, px.width / c.patch);
    s.mode = render::ViewMode::Abstention;
    const std::string library = render::png_bytes(render::render_view(e, s));
    const Image want = decode_image_memory(reinterpret_cast<const std::uint8_t*>(library.data()), library.size(), "library");
    const Image got = decode_image(dir / "snap.png");
    REQUIRE(got.width == want.width);
    REQUIRE(got.height == want.height);
    CHECK(got.rgb == want.rgb);
    // A different view does differ (the comparison can fail).
    s.query = 0;
    const std::string other = render::png_bytes(render::render_view(e, s));
    const Image different = decode_image_memory(reinterpret_cast<const std::uint8_t*>(other.data()), other.size(), "other");
    CHECK(different.rgb != got.rgb);
}

TEST_CASE("labels drawn into pictures are text the font draws: symbols spelled, others refused in tests") {
    CHECK(render::drawable_label("norm > median + 10\u00d7MAD") == "norm > median + 10xMAD");
    CHECK(render::drawable_label("layer 3 \u00b7 head 2 \u00b1 0.1\u03c3") == "layer 3 - head 2 +/- 0.1sigma");
    CHECK(render::drawable_label("caf\u00e9 Stra\u00dfe \u00c5") == "cafe Strasse A");
    CHECK(render::label_is_drawable("\u2264 1e-4 \u2192 ok"));
    CHECK_FALSE(render::label_is_drawable("\u65e5\u672c"));
    CHECK_FALSE(render::label_is_drawable("bad \xff byte"));
    // The suite runs with VITREG_STRICT_LABELS: a character no font table spells throws there,
    // so every picture a test renders holds drawable text only.
    REQUIRE(std::getenv("VITREG_STRICT_LABELS") != nullptr);
    const auto before = render::undrawable_characters();
    CHECK_THROWS_WITH(render::drawable_label("photo \u65e5.jpg"), Catch::Contains("cannot draw"));
    CHECK(render::undrawable_characters() == before + 1);
}
