// webdataset tar shards: samples grouped by key, every planted fault a sample's or the shard's
// error (never a crash, never a file written by a member's name), brace patterns; extract and
// dense from shards giving the features the same files give from a folder, bit for bit; and
// --layout shards outputs indexed and searched.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

#include "core/safetensors.hpp"
#include "io/webdataset.hpp"
#include "test_support.hpp"
#include "vitreg/dense.hpp"
#include "vitreg/error.hpp"
#include "vitreg/extract.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/merge.hpp"
#include "vitreg/search/index.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

// One ustar member: a 512-byte header (size as the header says, `declared` if given) and the
// data padded to 512 bytes.
std::string tar_member(const std::string& name, const std::string& data, unsigned long long declared = ~0ull) {
    std::string h(512, '\0');
    std::snprintf(&h[0], 100, "%s", name.c_str());
    std::snprintf(&h[100], 8, "%07o", 0644);
    std::snprintf(&h[108], 8, "%07o", 0);
    std::snprintf(&h[116], 8, "%07o", 0);
    std::snprintf(&h[124], 12, "%011llo", declared == ~0ull ? static_cast<unsigned long long>(data.size()) : declared);
    std::snprintf(&h[136], 12, "%011o", 0);
    h[156] = '0';
    std::memcpy(&h[257], "ustar\0" "00", 8);
    std::memset(&h[148], ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(&h[148], 8, "%06o", sum);
    h[155] = ' ';
    return h + data + std::string((512 - data.size() % 512) % 512, '\0');
}

std::string tar_end() { return std::string(1024, '\0'); }

std::vector<webdataset::Sample> read_all(const std::string& tar, std::string& error, bool with_image = true) {
    webdataset::ShardReader reader(tar.data(), tar.size(), "test.tar", {});
    std::vector<webdataset::Sample> out;
    webdataset::Sample s;
    while (reader.next(s, with_image)) out.push_back(s);
    error = reader.error();
    return out;
}

// A .jsonl file as one JSON array.
nlohmann::json jsonl(const std::string& path) {
    std::string text = read_bytes(path);
    for (char& c : text)
        if (c == '\n') c = ',';
    return nlohmann::json::parse("[" + text.substr(0, text.empty() ? 0 : text.size() - 1) + "]");
}

const char* const kPhotos[] = {"jpeg_420_67x45.jpg", "png_rgb_61x46.png", "jpeg_gray_61x47.jpg", "png_p_50x38.png"};

std::string photo(int i) { return read_bytes(fixture(std::string("photos/files/") + kPhotos[i])); }

}  // namespace

TEST_CASE("webdataset: members grouped by key, json and txt kept, faults per sample") {
    const std::string jpg = photo(0);
    const std::string tar = tar_member("a/000.jpg", jpg) + tar_member("a/000.json", "{\"url\": \"u\"}") +
                            tar_member("a/000.txt", "a cat") + tar_member("a/001.cls", "3") +  // no image
                            tar_member("a/002.PNG", "not an image") +  // decoded (and refused) later
                            tar_member("../evil.jpg", jpg) + tar_member("/abs.jpg", jpg) +
                            tar_member("a/003.jpg", jpg) + tar_member("a/003.webp", jpg) +  // two images
                            tar_member("a/000.jpg", jpg) + tar_end();                       // the key again
    std::string error;
    const auto s = read_all(tar, error);
    CHECK(error.empty());
    REQUIRE(s.size() == 7);
    CHECK(s[0].key == "a/000");
    CHECK(s[0].offset == 0);
    CHECK(s[0].image_ext == "jpg");
    CHECK(s[0].image == jpg);
    CHECK(s[0].json == "{\"url\": \"u\"}");
    CHECK(s[0].caption == "a cat");
    CHECK(s[0].error.empty());
    CHECK_THAT(s[1].error, Catch::Contains("no image member"));
    CHECK(s[1].offset == 512 + (jpg.size() + 511) / 512 * 512 + 2 * 1024);  // after the jpg, json and txt
    CHECK(s[2].image_ext == "png");
    CHECK(s[2].error.empty());
    CHECK_THAT(s[3].error, Catch::Contains("outside the shard"));
    CHECK_THAT(s[4].error, Catch::Contains("outside the shard"));
    CHECK_THAT(s[5].error, Catch::Contains("two image members"));
    CHECK_THAT(s[6].error, Catch::Contains("seen before") && Catch::Contains("at byte 0"));
    // Skipping the images groups the same samples.
    const auto skipped = read_all(tar, error, false);
    REQUIRE(skipped.size() == s.size());
    CHECK(skipped[0].image.empty());
    CHECK(skipped[6].key == "a/000");
}

TEST_CASE("webdataset: a truncated shard keeps the samples before the break and says where") {
    const std::string jpg = photo(0);
    const std::string whole = tar_member("k0.jpg", jpg) + tar_member("k1.jpg", jpg) + tar_member("k2.jpg", jpg) + tar_end();
    const std::size_t member = 512 + (jpg.size() + 511) / 512 * 512;
    std::string error;
    // Cut inside k2's data: k0 and k1 stay, k2 is gone, the break is at k2's header.
    auto s = read_all(whole.substr(0, 2 * member + 700), error);
    REQUIRE(s.size() == 2);
    CHECK(s[1].key == "k1");
    CHECK_THAT(error, Catch::Contains("runcated"));
    webdataset::ShardReader reader(whole.data(), 2 * member + 700, "t.tar", {});
    webdataset::Sample sample;
    while (reader.next(sample, true)) {
    }
    CHECK(reader.error_offset() == 2 * member);
    // Cut inside a header.
    s = read_all(whole.substr(0, member + 100), error);
    CHECK(s.size() == 1);
    CHECK_FALSE(error.empty());
    // Not a tar at all; and a path that does not exist.
    s = read_all(std::string(3000, 'x'), error);
    CHECK(s.empty());
    CHECK_FALSE(error.empty());
    webdataset::ShardReader missing("/nonexistent/00000.tar", {});
    CHECK_FALSE(missing.next(sample, true));
    CHECK(missing.error() == "does not exist");
}

TEST_CASE("webdataset: a 2 GB size field allocates nothing ahead") {
    const std::string tar = tar_member("big.jpg", "tiny", 2ull << 30) + tar_end();
    std::string error;
    // Over the image limit (1 GB): the sample is refused by size; the shard then ends short.
    auto s = read_all(tar, error);
    CHECK(s.empty());
    CHECK_FALSE(error.empty());
    // Under a larger limit the data is read as it arrives and the shard breaks where it ends.
    webdataset::ShardReader reader(tar.data(), tar.size(), "big.tar", {4ull << 30, 1 << 20});
    webdataset::Sample sample;
    CHECK_FALSE(reader.next(sample, true));
    CHECK_FALSE(reader.error().empty());
    CHECK(reader.error_offset() == 0);
}

TEST_CASE("webdataset: shard names and brace patterns") {
    CHECK(is_shard_path("a/00001.tar"));
    CHECK(is_shard_path("x.TAR.GZ"));
    CHECK(is_shard_path("x.tar.zst"));
    CHECK_FALSE(is_shard_path("x.jpg"));
    CHECK(expand_braces("s/{00008..00011}.tar") ==
          std::vector<std::string>{"s/00008.tar", "s/00009.tar", "s/00010.tar", "s/00011.tar"});
    CHECK(expand_braces("{8..10}-{a,b}.tar") ==
          std::vector<std::string>{"8-a.tar", "8-b.tar", "9-a.tar", "9-b.tar", "10-a.tar", "10-b.tar"});
    CHECK(expand_braces("plain.tar") == std::vector<std::string>{"plain.tar"});
    CHECK_THROWS_AS(expand_braces("{1..3.tar"), UsageError);
    CHECK_THROWS_AS(expand_braces("{3..1}.tar"), UsageError);
    CHECK_THROWS_AS(expand_braces("{a..b}.tar"), UsageError);
    CHECK_THROWS_AS(expand_braces("{0..999999}{0..9}.tar"), UsageError);
    TempDir dir;
    CHECK(expand_inputs({dir / "{0..2}.tar"}) ==
          std::vector<std::string>{dir / "0.tar", dir / "1.tar", dir / "2.tar"});
}

TEST_CASE("extract from shards: the folder's features bit for bit, faults as rows") {
    TempDir dir;
    std::string shard0, shard1;
    std::vector<std::string> files;
    for (int i = 0; i < 4; ++i) {
        const std::string name = std::string(kPhotos[i]);
        const std::string ext = name.substr(name.rfind('.'));
        const std::string key = "s" + std::to_string(i);
        (i < 2 ? shard0 : shard1) += tar_member(key + ext, photo(i)) + tar_member(key + ".txt", "caption " + key) +
                                     tar_member(key + ".json", "{\"i\": " + std::to_string(i) + "}");
        files.push_back(dir / (key + ext));
        write_bytes(files.back(), photo(i));
    }
    shard0 += tar_member("bad.jpg", "not an image") + tar_end();
    shard1 += tar_member("s9.jpg", photo(0));  // cut short: s9 is lost, shard 1 recorded as broken
    shard1.resize(shard1.size() - 300);
    write_bytes(dir / "00000.tar", shard0);
    write_bytes(dir / "00001.tar", shard1);

    const Model m = Model::load(fixture("models/dinov2_reg2_f16.safetensors"));
    ExtractOptions o;
    o.resize = ResizeSpec::parse("28x28");
    o.batch = 2;
    o.chunk_rows = 2;
    o.out_dir = dir / "folder";
    o.patch_tokens = true;
    extract_features(m, files, o);
    o.patch_tokens = false;
    o.out_dir = dir / "shards";
    const auto inputs = expand_inputs({dir / "{00000..00002}.tar"});
    StageSeconds stages;
    o.stage_progress = [&](const StageSeconds& t) { stages = t; };
    const auto s = extract_features(m, inputs, o);
    o.stage_progress = nullptr;
    CHECK(stages.read > 0);  // the shards' stream, timed apart from decoding and the forward
    CHECK(stages.decode > 0);
    CHECK(stages.forward > 0);
    CHECK(s.ok == 4);
    CHECK(s.failed == 3);  // bad.jpg, shard 1's break, shard 2 missing
    for (const char* array : {"cls.npy", "pooled.npy", "registers.npy"})
        CHECK(read_bytes(dir / ("shards/" + std::string(array))) == read_bytes(dir / ("folder/" + std::string(array))));

    const auto rows = jsonl(dir / "shards/manifest.jsonl");
    REQUIRE(rows.size() == 7);
    CHECK(rows[0]["path"] == dir / "00000.tar");
    CHECK(rows[0]["key"] == "s0");
    CHECK(rows[0]["offset"] == 0);
    CHECK(rows[0]["caption"] == "caption s0");
    CHECK(rows[0]["metadata"]["i"] == 0);
    CHECK(rows[0]["status"] == "ok");
    CHECK(rows[2]["key"] == "bad");
    CHECK_THAT(rows[2]["error"].get<std::string>(), Catch::Contains("00000.tar:bad"));
    CHECK(rows[4]["key"] == "s3");
    CHECK(rows[4]["row"] == 3);
    CHECK(rows[5]["path"] == dir / "00001.tar");
    CHECK_THAT(rows[5]["error"].get<std::string>(), Catch::Contains("shard broken at byte"));
    CHECK_THAT(rows[6]["error"].get<std::string>(), Catch::Contains("does not exist"));

    // Killed after its first chunk (s0, s1): the run resumes in the middle of shard 0, to the same bytes.
    std::remove((dir / "shards/run.json").c_str());
    for (const char* chunk : {"00000001.safetensors", "00000002.safetensors", "00000003.safetensors"})
        std::remove((dir / "shards/chunks/" + chunk).c_str());
    const std::string before = read_bytes(dir / "shards/cls.npy") + read_bytes(dir / "shards/manifest.jsonl");
    o.resume = true;
    extract_features(m, inputs, o);
    CHECK(read_bytes(dir / "shards/cls.npy") + read_bytes(dir / "shards/manifest.jsonl") == before);

    // Split over two processes by shard file (block K of N of the sorted shards), then merged:
    // the single run's files.
    o.resume = false;
    o.out_dir = dir / "split";
    o.shard_count = 2;
    for (int k = 0; k < 2; ++k) {
        o.shard_index = k;
        extract_features(m, inputs, o);
    }
    CHECK(jsonl(dir / "split/shard-0-of-2/manifest.jsonl").size() == 3);  // 00000.tar: s0, s1, bad
    CHECK(merge_shards(dir / "split").rows.inputs == 7);
    for (const char* file : {"cls.npy", "registers.npy", "manifest.jsonl"})
        CHECK(read_bytes(dir / ("split/" + std::string(file))) == read_bytes(dir / ("shards/" + std::string(file))));

    // --layout shards: one output shard per input shard, split and merged the same; patch tokens
    // gathered per shard, the folder's per-image ones bit for bit.
    o.shard_layout = true;
    o.patch_tokens = true;
    auto check_patches = [&](const std::string& out) {
        for (int shard = 0; shard < 2; ++shard) {
            const SafetensorsFile patches(out + "/0000" + std::to_string(shard) + ".patch.safetensors");
            CHECK(patches.names() == std::vector<std::string>{"0", "1"});
            CHECK(patches.metadata().at("keys") == nlohmann::json{"s" + std::to_string(2 * shard),
                                                                  "s" + std::to_string(2 * shard + 1)}.dump());
            for (int row = 0; row < 2; ++row) {
                const auto& t = patches.get(std::to_string(row));
                CHECK(t.shape == std::vector<std::int64_t>{7, 7, m.config().dim});  // 28 pixels, patch 4
                CHECK(t.to_float() == npy_data(dir / ("folder/patch/" + std::to_string(2 * shard + row) + ".npy")));
            }
        }
        CHECK(SafetensorsFile(out + "/00002.patch.safetensors").names().empty());
    };
    for (const std::string out : {"layout", "layout-split"}) {
        o.out_dir = dir / out;
        o.shard_count = out == "layout" ? 1 : 2;
        for (int k = 0; k < o.shard_count; ++k) {
            o.shard_index = k;
            extract_features(m, inputs, o);
        }
        if (o.shard_count > 1) merge_shards(o.out_dir);
        auto cls = npy_data(o.out_dir + "/00000.cls.npy");
        const auto more = npy_data(o.out_dir + "/00001.cls.npy");
        cls.insert(cls.end(), more.begin(), more.end());
        CHECK(cls == npy_data(dir / "shards/cls.npy"));
        CHECK(npy_data(o.out_dir + "/00002.cls.npy").empty());
        const auto keys = jsonl(o.out_dir + "/00000.keys.jsonl");
        REQUIRE(keys.size() == 3);
        CHECK(keys[1]["key"] == "s1");
        CHECK(keys[1]["row"] == 1);
        CHECK(keys[1]["metadata"]["i"] == 1);
        CHECK(jsonl(o.out_dir + "/manifest.jsonl").size() == 7);
        CHECK_FALSE(exists(o.out_dir + "/cls.npy"));
        check_patches(o.out_dir);
    }
    // Killed after its first chunk: resumed, the same shard files.
    const std::string layout = dir / "layout";
    const std::string whole = read_bytes(layout + "/00000.patch.safetensors") + read_bytes(layout + "/00001.keys.jsonl");
    for (const char* gone : {"/run.json", "/00000.patch.safetensors", "/00001.keys.jsonl", "/chunks/00000001.safetensors",
                             "/chunks/00000002.safetensors", "/patch/2.safetensors"})
        std::remove((layout + gone).c_str());
    o.out_dir = layout;
    o.shard_count = 1;
    o.shard_index = 0;
    o.resume = true;
    extract_features(m, inputs, o);
    o.resume = false;
    CHECK(read_bytes(layout + "/00000.patch.safetensors") + read_bytes(layout + "/00001.keys.jsonl") == whole);
    o.patch_tokens = false;
    o.out_dir = dir / "layout-files";
    CHECK_THROWS_AS(extract_features(m, files, o), UsageError);
    o.shard_layout = false;

    // Shards and image files in one list are refused.
    o.out_dir = dir / "mixed";
    CHECK_THROWS_AS(extract_features(m, {dir / "00000.tar", files[0]}, o), UsageError);
}

TEST_CASE("index a --layout shards folder: ids back to key, shard and offset", "[search]") {
    TempDir dir;
    std::vector<std::string> shards(2);
    for (int i = 0; i < 4; ++i) {
        const std::string name = kPhotos[i];
        shards[i / 2] += tar_member("s" + std::to_string(i) + name.substr(name.rfind('.')), photo(i)) +
                         tar_member("s" + std::to_string(i) + ".json", "{\"i\": " + std::to_string(i) + "}");
    }
    const std::vector<std::string> inputs{dir / "00000.tar", dir / "00001.tar"};
    for (int k = 0; k < 2; ++k) write_bytes(inputs[k], shards[k] + tar_end());
    const Model m = Model::load(fixture("models/dinov2_reg2_f16.safetensors"));
    ExtractOptions o;
    o.resize = ResizeSpec::parse("28x28");
    o.out_dir = dir / "files";
    extract_features(m, inputs, o);
    o.shard_layout = true;
    o.out_dir = dir / "npy";
    extract_features(m, inputs, o);
    o.format = FeatureFormat::Safetensors;
    o.out_dir = dir / "safetensors";
    extract_features(m, inputs, o);

    const FeatureSource files = read_feature_source(dir / "files", "cls");
    for (const char* layout : {"npy", "safetensors"}) {
        const FeatureSource s = read_feature_source(dir / layout, "cls");
        REQUIRE(s.rows == 4);
        CHECK(std::vector<float>(s.data, s.data + 4 * s.dim) == std::vector<float>(files.data, files.data + 4 * s.dim));
        for (int i = 0; i < 4; ++i) {
            CHECK(s.entries[i].to_json() == files.entries[i].to_json());  // as the files layout maps them
            CHECK(s.entries[i].key == "s" + std::to_string(i));
            CHECK(s.entries[i].shard == inputs[i / 2]);
            CHECK(s.entries[i].metadata["i"] == i);
        }
        build_index(s, dir / (std::string(layout) + "-index"), IndexOptions{"Flat"});
        const Index index(dir / (std::string(layout) + "-index"));
        const auto hits = index.search(s.data, 4, 2);
        for (int i = 0; i < 4; ++i) {
            CHECK(hits[i][0].id == i);
            CHECK(std::fabs(hits[i][0].score - 1.0f) <= 1e-6f);
            CHECK(index.entry(i).shard == inputs[i / 2]);
            CHECK(read_entry_bytes(index.entry(i), 1 << 20) == photo(i));  // the thumbnail, read at its offset
        }
    }
    const std::string keys = read_bytes(dir / "npy/00001.keys.jsonl");
    write_bytes(dir / "npy/00001.keys.jsonl", keys.substr(0, keys.find('\n') + 1));  // 1 row, 2 vectors
    CHECK_THROWS_WITH(read_feature_source(dir / "npy", "cls"), Catch::Contains("00001.keys.jsonl"));
}

TEST_CASE("search preprocesses queries as the index's extract did, and refuses a contradiction", "[search]") {
    TempDir dir;
    const Model m = Model::load(fixture("models/dinov2_reg2_f16.safetensors"));
    std::vector<std::string> files;
    for (int i = 0; i < 2; ++i) {
        files.push_back(dir / ("p" + std::to_string(i) + ".png"));
        write_bytes(files.back(), photo(i + 1));
    }
    ExtractOptions o;
    o.resize = ResizeSpec::parse("28x28");
    o.resize.resampler = Resampler::Torch;
    o.out_dir = dir / "features";
    extract_features(m, files, o);
    build_index(read_feature_source(o.out_dir, "cls"), dir / "index", IndexOptions{"Flat"});
    const Index index(dir / "index");
    const ResizeSpec r = query_pixels(index.info(), m, ResizeSpec{}, {});
    CHECK(r.to_string() == o.resize.to_string());
    for (int i = 0; i < 2; ++i) {  // each file finds itself: the query's vector is its extract's
        const auto q = query_vector(m, load_pixels(files[i], r, m.config(), {}), "cls");
        const auto hits = index.search(q.data(), 1, 1);
        CHECK(hits[0][0].id == i);
        CHECK(std::fabs(hits[0][0].score - 1.0f) <= 1e-6f);
    }
    // Given options: agreeing ones pass (the checkpoint's own pipeline named), contradicting ones are refused by name.
    ResizeSpec asked = o.resize;
    asked.pipeline = o.resize.for_model(m.config()).pipeline;
    CHECK(query_pixels(index.info(), m, asked, {{"resize", "--resize"}, {"pipeline", "--pipeline"}}).to_string() ==
          o.resize.to_string());
    CHECK_THROWS_WITH(query_pixels(index.info(), m, ResizeSpec{}, {{"resize", "--resize"}}),
                      Catch::Contains("--resize eval contradicts") && Catch::Contains("--resize 28x28"));
    CHECK_THROWS_WITH(query_pixels(index.info(), m, ResizeSpec{}, {{"resample", "resample="}}),
                      Catch::Contains("resample= pil contradicts"));
    // An index built from memory states none: the given options stand.
    CHECK(query_pixels(nlohmann::json::object(), m, ResizeSpec{}, {{"resize", "--resize"}}).to_string() == "eval");
    nlohmann::json bad = index.info();
    bad["source"]["run"]["resize"] = "28x28 sharpen=2";
    CHECK_THROWS_WITH(extracted_pixels(bad), Catch::Contains("index.json") && Catch::Contains("sharpen"));
    bad["source"]["run"]["resize"] = "28x28 exif-transpose=1";
    CHECK_THROWS_AS(extracted_pixels(bad), UsageError);
    bad["source"]["run"]["resize"] = "28x28 pipeline=timm decode=draft exif-transpose";
    CHECK(extracted_pixels(bad)->to_string() == "28x28 pipeline=timm decode=draft exif-transpose");
}

TEST_CASE("dense from a tar shard: the folder's grids bit for bit") {
    TempDir dir;
    std::string shard;
    std::vector<std::string> files;
    for (int i = 0; i < 2; ++i) {
        const std::string name = kPhotos[i];
        const std::string file = "s" + std::to_string(i) + name.substr(name.rfind('.'));
        shard += tar_member(file, photo(i));
        files.push_back(dir / file);
        write_bytes(files.back(), photo(i));
    }
    write_bytes(dir / "00000.tar", shard + tar_end());
    const Model m = Model::load(fixture("models/dinov2_reg2_f16.safetensors"));
    DenseOptions o;
    o.resize = ResizeSpec::parse("28x28");
    o.out_dir = dir / "folder";
    REQUIRE(dense_features(m, files, o).ok == 2);
    o.out_dir = dir / "shard";
    REQUIRE(dense_features(m, {dir / "00000.tar"}, o).ok == 2);
    for (const char* row : {"0.npy", "1.npy"}) {
        const auto grid = npy_data(dir / ("shard/" + std::string(row)));
        CHECK(grid.size() == 7u * 7u * m.config().dim);
        CHECK(grid == npy_data(dir / ("folder/" + std::string(row))));
    }
    const auto rows = jsonl(dir / "shard/manifest.jsonl");
    CHECK(rows[1]["key"] == "s1");
    CHECK(rows[1]["file"] == "1.npy");
}
