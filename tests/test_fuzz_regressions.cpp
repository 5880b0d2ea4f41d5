// Replays the fuzzers' seeds and every input a fuzzer ever flagged (fuzz/regressions/<target>/)
// through the same code the fuzzers run; in the sanitizer build this is where a past finding
// would show up again. fuzz/targets.txt is the one list of targets: CMake builds a fuzzer for each
// name, scripts/fuzz.sh runs each, and this test replays each and checks the dispatch table agrees.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "fuzz_files.hpp"
#include "targets.hpp"
#include "vitreg/analysis/correspondence.hpp"
#include "vitreg/analysis/defects.hpp"
#include "vitreg/analysis/eval_data.hpp"
#include "vitreg/register_neuron_file.hpp"
#include "vitreg/repair.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> listed_targets() {
    std::ifstream in(fs::path(VITREG_FUZZ_DIR) / "targets.txt");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(line);
    return out;
}

// The inputs of one folder; dot-files (a .gitkeep) are not inputs.
std::vector<fs::path> inputs(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().filename().string().front() != '.') out.push_back(entry.path());
    return out;
}

std::string text_of(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("every fuzz target is listed once, with seeds and a regression folder", "[fuzz]") {
    const fs::path root = VITREG_FUZZ_DIR;
    const std::vector<std::string> listed = listed_targets();
    CHECK(listed == vitreg::fuzz::target_names());
    CHECK(listed.size() >= 13);
    const std::set<std::string> names(listed.begin(), listed.end());
    for (const std::string& t : listed) {
        INFO(t);
        CHECK(fs::is_directory(root / "regressions" / t));
        CHECK(fs::is_directory(root / "seeds" / t));
        if (fs::is_directory(root / "seeds" / t)) CHECK(inputs(root / "seeds" / t).size() >= 2);
    }
    for (const char* set : {"seeds", "regressions"})
        for (const auto& entry : fs::directory_iterator(root / set)) {
            INFO(entry.path().string());
            CHECK(names.count(entry.path().filename().string()) == 1);  // no folder nothing replays
        }
    CHECK_FALSE(vitreg::fuzz::run_target("no-such-target", nullptr, 0));
}

TEST_CASE("fuzz seeds and past findings are handled", "[fuzz]") {
    const fs::path root = VITREG_FUZZ_DIR;
    std::size_t replayed = 0;
    for (const std::string& target : listed_targets()) {
        for (const char* set : {"seeds", "regressions"}) {
            const fs::path dir = root / set / target;
            if (!fs::is_directory(dir)) continue;
            for (const fs::path& path : inputs(dir)) {
                const std::string bytes = text_of(path);
                INFO(path.string());
                CHECK(vitreg::fuzz::run_target(target, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
                ++replayed;
            }
        }
    }
    CHECK(replayed >= 60);
}

TEST_CASE("a fuzz input becomes the folder tree it lists", "[fuzz]") {
    const std::string root = vitreg::fuzz::scratch() + "/tree-test";
    const std::string input =
        "images/a.jpg\nmasks/a.png\nempty/\n../escape\na/./b\nw/x/y/z\nimages/b.jpg\n\nfirst\n--\nsecond";
    vitreg::fuzz::make_tree(root, reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    CHECK(text_of(root + "/images/a.jpg") == "first");
    CHECK(text_of(root + "/masks/a.png") == "second");
    CHECK(fs::is_regular_file(root + "/images/b.jpg"));
    CHECK(fs::file_size(root + "/images/b.jpg") == 0);  // past the last piece
    CHECK(fs::is_directory(root + "/empty"));
    CHECK_FALSE(fs::exists(vitreg::fuzz::scratch() + "/escape"));
    CHECK_FALSE(fs::exists(root + "/a"));
    CHECK_FALSE(fs::exists(root + "/w"));  // four parts
    const std::string again = "only/this";
    vitreg::fuzz::make_tree(root, reinterpret_cast<const std::uint8_t*>(again.data()), again.size());
    CHECK_FALSE(fs::exists(root + "/images"));  // emptied first
    CHECK(fs::is_regular_file(root + "/only/this"));
}

TEST_CASE("the new readers' fuzz seeds are real files: each reader takes the good ones", "[fuzz]") {
    const fs::path seeds = fs::path(VITREG_FUZZ_DIR) / "seeds";
    const auto good = [&](const char* target) {
        std::vector<std::string> out;
        for (const fs::path& p : inputs(seeds / target))
            if (p.filename().string().rfind("bad_", 0) != 0) out.push_back(p.string());
        CHECK(out.size() >= 2);
        return out;
    };
    for (const auto& path : good("homography")) CHECK_NOTHROW(vitreg::read_pair_geometry(path));
    for (const auto& path : good("calibration")) CHECK_NOTHROW(vitreg::RepairCalibration::read(path));
    for (const auto& path : good("neurons")) CHECK(vitreg::read_register_neurons(path).selected.size() == 2);
    const vitreg::DefectDirections d = vitreg::read_defects((seeds / "defects" / "two_layers.safetensors").string());
    CHECK((d.layers == 2 && d.dim == 8 && d.top == 3));
    for (const auto& path : good("disparity")) {
        // The reader takes a disparity map by its extension; the target stores a bare .npy into an .npz.
        if (fs::path(path).extension() == ".npy") continue;
        const vitreg::PairGeometry g = vitreg::read_pair_geometry(path);
        CHECK((g.width == 6 && g.height == 4));
    }
    const auto tree = [&](const char* seed) {
        const std::string root = vitreg::fuzz::scratch() + "/seed-tree", bytes = text_of(seeds / seed);
        vitreg::fuzz::make_tree(root, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        return root;
    };
    const vitreg::ClassFolders classes = vitreg::read_class_folders(tree("classes/two_classes.tree"));
    CHECK((classes.classes == std::vector<std::string>{"cat", "dog"} && classes.labels == std::vector<int>{0, 0, 1, 1}));
    for (const char* seed : {"segmentation/palette.tree", "segmentation/grey.tree"}) {
        const std::string root = tree(seed);
        const auto samples = vitreg::read_segmentation_folder(root + "/images", root + "/masks");
        REQUIRE(samples.size() == 2);
        const vitreg::LabelMask mask = vitreg::read_label_mask(samples[0].mask);
        CHECK((mask.width == 4 && mask.height == 3));
        CHECK(mask.labels == std::vector<std::uint8_t>{0, 0, 1, 1, 0, 255, 1, 1, 2, 2, 0, 0});
    }
}
