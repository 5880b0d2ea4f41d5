// The checkpoints shipped in weights/: each loads, states what it is, and a trained one
// scores on the held-out set (tests/fixtures/heldout) what weights/README.md says.
#include <dirent.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/image.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

std::vector<std::string> shipped_files() {
    std::vector<std::string> out;
    const std::string dir = VITREG_WEIGHTS_DIR;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) out.push_back(dir + "/" + n);
        }
        ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, sep)) out.push_back(item);
    return out;
}

const char* const kTrainedKeys[] = {"heads", "patch_size", "num_registers", "attention", "pos_interp", "layer_norm_eps",
                                    "image_mean", "image_std", "trained", "data", "task", "classes", "head_input",
                                    "threshold", "steps", "batch", "seed", "lr", "train_seconds", "final_loss",
                                    "heldout_accuracy", "recipe", "config"};

}  // namespace

TEST_CASE("every shipped checkpoint loads and says whether it was trained") {
    const auto files = shipped_files();
    REQUIRE_FALSE(files.empty());
    for (const auto& f : files) {
        INFO(f);
        const Checkpoint ck(f);
        const auto& meta = ck.file().metadata();
        REQUIRE(meta.count("trained") == 1);
        if (meta.at("trained") != "true") continue;
        for (const char* key : kTrainedKeys) {
            INFO("metadata key " << key);
            CHECK((meta.count(key) == 1 && !meta.at(key).empty()));
        }
        CHECK(to_string(ck.config().attention) == meta.at("attention"));
        CHECK(ck.config().registers == std::stoi(meta.at("num_registers")));
    }
}

TEST_CASE("trained checkpoints score on the held-out set what weights/README.md says") {
    std::ifstream ein(fixture("heldout/expected.json")), lin(fixture("heldout/labels.json"));
    const bool have_heldout = ein.good() && lin.good();
    int trained = 0;
    for (const auto& f : shipped_files()) {
        const Checkpoint ck(f);
        if (ck.file().metadata().at("trained") != "true") continue;
        ++trained;
    }
    if (trained == 0) return;  // only the untrained placeholder is shipped
    REQUIRE(have_heldout);
    const auto expected = nlohmann::json::parse(ein)["checkpoints"];
    const auto labels = nlohmann::json::parse(lin);
    for (const auto& f : shipped_files()) {
        const std::string rel = "weights/" + f.substr(f.find_last_of('/') + 1);
        INFO(rel);
        const Model m = Model::load(f);
        const SafetensorsFile file(f);
        const auto& meta = file.metadata();
        if (meta.at("trained") != "true") continue;
        REQUIRE(expected.contains(rel));
        const auto w = file.get("head.weight").to_float(), b = file.get("head.bias").to_float();
        const int classes = static_cast<int>(b.size());
        const bool with_pooled = meta.at("head_input") == "cls+pooled";
        const int in = m.config().dim * (with_pooled ? 2 : 1);
        REQUIRE(w.size() == static_cast<std::size_t>(classes) * in);
        const float threshold = std::stof(meta.at("threshold"));
        int exact = 0, n = 0;
        for (auto it = labels.begin(); it != labels.end(); ++it) {
            const Config& c = m.config();
            const Pixels px = preprocess(decode_image(fixture("heldout/" + it.key())), ResizeSpec::parse("none"), c.patch,
                                         c.mean, c.std);
            const Features feats = m.forward(px.chw.data(), 1, px.height, px.width);
            std::vector<float> x(feats.cls_of(0), feats.cls_of(0) + c.dim);
            if (with_pooled) {
                const auto p = feats.pooled_of(0);
                x.insert(x.end(), p.begin(), p.end());
            }
            bool all = true;
            for (int k = 0; k < classes; ++k) {
                double logit = b[k];
                for (int d = 0; d < in; ++d) logit += static_cast<double>(w[static_cast<std::size_t>(k) * in + d]) * x[d];
                const bool predicted = 1.0 / (1.0 + std::exp(-logit)) > threshold;
                all = all && predicted == (it.value()[k].get<int>() == 1);
            }
            exact += all;
            ++n;
        }
        const double accuracy = static_cast<double>(exact) / n;
        CHECK(accuracy == Approx(expected[rel]["heldout_accuracy"].get<double>()).margin(0.021));
        CHECK(accuracy == Approx(std::stod(meta.at("heldout_accuracy"))).margin(0.021));
    }
}
