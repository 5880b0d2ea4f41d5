// The batch job: good images land in input order with the same features a direct forward
// gives; bad ones become error rows with reasons; nothing half-written is left behind.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <cstring>
#include <sstream>

#include "test_support.hpp"
#include "vitreg/error.hpp"
#include "vitreg/extract.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

std::vector<nlohmann::json> manifest(const std::string& dir) {
    std::vector<nlohmann::json> rows;
    std::istringstream in(read_bytes(dir + "/manifest.jsonl"));
    std::string line;
    while (std::getline(in, line)) rows.push_back(nlohmann::json::parse(line));
    return rows;
}


}  // namespace

TEST_CASE("extract: rows in input order, failures recorded, features equal the forward") {
    TempDir dir;
    const std::string img = fixture("images/smooth_90x120.png");
    write_bytes(dir / "broken.png", "not a png");
    const std::vector<std::string> inputs{img, dir / "broken.png", fixture("images/gray16_20x10.png"), dir / "missing.jpg", img};
    const Model m = Model::load(fixture("models/dinov2_reg2_f16.safetensors"));
    ExtractOptions o;
    o.out_dir = dir / "out";
    o.resize = ResizeSpec::parse("32x24");
    o.patch_tokens = true;
    o.batch = 2;
    std::size_t last_done = 0;
    const auto s = extract_features(m, inputs, o, [&](std::size_t done, std::size_t total) {
        CHECK(total == inputs.size());
        CHECK(done > last_done);
        last_done = done;
    });
    CHECK(last_done == inputs.size());
    CHECK(s.ok == 3);
    CHECK(s.failed == 2);

    const auto rows = manifest(o.out_dir);
    REQUIRE(rows.size() == 5);
    CHECK(rows[0]["status"] == "ok");
    CHECK(rows[0]["row"] == 0);
    CHECK(rows[0]["grid"] == nlohmann::json::array({6, 8}));
    CHECK(rows[1]["status"] == "error");
    CHECK_THAT(rows[1]["error"].get<std::string>(), Catch::Contains("broken.png") && Catch::Contains("not a decodable image"));
    CHECK(rows[2]["row"] == 1);
    CHECK(rows[3]["status"] == "error");
    CHECK_THAT(rows[3]["error"].get<std::string>(), Catch::Contains("No such file"));
    CHECK(rows[4]["row"] == 2);

    // Row 2 (the same image as row 0, in another batch) against a direct forward.
    const Image decoded = decode_image(img);
    const Pixels px = preprocess(decoded, o.resize, 4, m.config().mean, m.config().std);
    const Features f = m.forward(px.chw.data(), 1, px.height, px.width);
    const auto cls = npy_data(o.out_dir + "/cls.npy");
    REQUIRE(cls.size() == 3 * 64);
    CHECK(relative_error(cls.data() + 2 * 64, f.cls) < 1e-6);
    const auto regs = npy_data(o.out_dir + "/registers.npy");
    REQUIRE(regs.size() == 3 * 2 * 64);
    CHECK(relative_error(regs.data() + 2 * 2 * 64, f.reg_tokens) < 1e-6);
    CHECK(relative_error(npy_data(o.out_dir + "/pooled.npy").data() + 2 * 64, f.pooled_of(0)) < 1e-6);
    CHECK(relative_error(npy_data(o.out_dir + "/patch/2.npy"), f.patches) < 1e-6);
    CHECK(std::system(("test -z \"$(find '" + o.out_dir + "' -name '*.tmp.*')\"").c_str()) == 0);
}

TEST_CASE("extract to safetensors writes features.safetensors and per-row patch files") {
    TempDir dir;
    const Model m = Model::load(fixture("models/dinov2_f32.safetensors"));
    ExtractOptions o;
    o.out_dir = dir / "out";
    o.resize = ResizeSpec::parse("long:40");
    o.format = FeatureFormat::Safetensors;
    o.patch_tokens = true;
    const auto s = extract_features(m, {fixture("images/smooth_90x120.png")}, o);
    CHECK(s.ok == 1);
    const SafetensorsFile f(o.out_dir + "/features.safetensors");
    CHECK(f.get("cls").shape == std::vector<std::int64_t>{1, 64});
    CHECK(f.get("pooled").shape == std::vector<std::int64_t>{1, 64});
    CHECK_FALSE(f.has("registers"));
    const SafetensorsFile p(o.out_dir + "/patch/0.safetensors");
    CHECK(p.get("patch").shape == std::vector<std::int64_t>{7, 10, 64});
}

TEST_CASE("shards split the sorted inputs into equal blocks, whatever the listing order") {
    std::vector<std::string> inputs;
    for (int i = 0; i < 23; ++i) inputs.push_back("img" + std::to_string(100 + (i * 7) % 23) + ".png");
    std::vector<std::string> reversed(inputs.rbegin(), inputs.rend());
    std::vector<int> seen(inputs.size(), 0);
    for (int k = 0; k < 4; ++k) {
        const auto mine = vitreg::shard_positions(inputs, k, 4);
        const auto theirs = vitreg::shard_positions(reversed, k, 4);
        CHECK((mine.size() == 5 || mine.size() == 6));
        REQUIRE(mine.size() == theirs.size());
        for (std::size_t i = 0; i < mine.size(); ++i) {
            CHECK(inputs[mine[i]] == reversed[theirs[i]]);  // the same files, in sorted order
            if (i) CHECK(inputs[mine[i - 1]] < inputs[mine[i]]);
            ++seen[mine[i]];
        }
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    const auto all = vitreg::shard_positions(inputs, 0, 1);
    CHECK(all.size() == inputs.size());
    CHECK(all[3] == 3);  // one shard keeps the given order
    CHECK_THROWS_AS(vitreg::shard_positions(inputs, 4, 4), vitreg::UsageError);
    CHECK(vitreg::shard_dir("out", 2, 4) == "out/shard-2-of-4");
    CHECK(vitreg::shard_dir("out", 0, 1) == "out");
}
