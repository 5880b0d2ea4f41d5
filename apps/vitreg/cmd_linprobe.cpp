// vitreg linprobe MODEL --data DIR: how well a linear per-patch classifier on the model's dense
// features segments images with known masks (mIoU).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/inspect.hpp"
#include "vitreg/analysis/linear_probe.hpp"

namespace vitreg::cli {

void register_linprobe(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("linprobe", "fit a per-patch linear classifier on dense features; report mIoU");
    struct Args {
        ModelArgs model;
        std::string data, layers = "last";
        bool norm = true, json = false;
        double train_fraction = 0.75, ridge = 1.0;
        int threads = 0;
    };
    auto a = std::make_shared<Args>();
    add_model_args(*cmd, a->model);
    cmd->add_option("--data", a->data, "folder of img_*.png with mask_*.png beside (8-bit labels, 0 = background)")->required();
    cmd->add_option("--layers", a->layers, "layers whose patch tokens are concatenated")->capture_default_str();
    cmd->add_option("--norm", a->norm, "apply the final LayerNorm")->capture_default_str();
    cmd->add_option("--train-fraction", a->train_fraction, "the first part of the sorted images fits, the rest scores")
        ->check(CLI::Range(0.05, 0.95))
        ->capture_default_str();
    cmd->add_option("--ridge", a->ridge, "ridge strength")->check(CLI::Range(0.0, 1e6))->capture_default_str();
    cmd->add_flag("--json", a->json, "print the result as JSON");
    add_table_option(*cmd, "threads", a->threads);
    cmd->callback([&run, a] {
        run = [a] {
            namespace fs = std::filesystem;
            std::vector<std::string> images;
            std::error_code ec;
            for (const auto& e : fs::directory_iterator(a->data, ec)) {
                const std::string name = e.path().filename().string();
                if (name.rfind("img_", 0) == 0 && e.path().extension() == ".png") images.push_back(e.path().string());
            }
            if (ec) throw UsageError(a->data + ": " + ec.message());
            std::sort(images.begin(), images.end());
            if (images.size() < 2) throw UsageError(a->data + ": needs at least two img_*.png with mask_*.png");
            const Model m = load_model(a->model);
            Probe probe;
            probe.block_layers = resolve_layers(a->layers, m.config().depth);
            probe.blocks_normed = a->norm;
            const int dim = static_cast<int>(probe.block_layers.size()) * m.config().dim, patch = m.config().patch;

            std::vector<LabelledPatches> train, test;
            int classes = 1;
            const std::size_t n_train = std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(a->train_fraction * images.size())));
            for (std::size_t i = 0; i < images.size(); ++i) {
                const std::string mask_path = fs::path(images[i]).replace_filename("mask_" + fs::path(images[i]).filename().string().substr(4)).string();
                const Image mask = decode_image(mask_path);
                const Inspection in = inspect(m, images[i], ResizeSpec::parse("none"), probe, a->threads);
                std::vector<std::uint8_t> labels(static_cast<std::size_t>(mask.width) * mask.height);
                for (std::size_t p = 0; p < labels.size(); ++p) labels[p] = mask.rgb[3 * p];
                LabelledPatches s;
                s.labels = patch_labels(labels.data(), mask.width, mask.height, patch);
                const Trace& t = in.trace;
                if (static_cast<int>(s.labels.size()) != t.patch_count())
                    throw UsageError(mask_path + ": mask size differs from its image");
                s.features = t.patch_features(0);
                for (int l : s.labels) classes = std::max(classes, l + 1);
                (i < n_train ? train : test).push_back(std::move(s));
            }
            const LinearProbeResult r = linear_probe(train, test, dim, classes, a->ridge);
            if (a->json) {
                nlohmann::json j = {{"model", m.path()}, {"miou", r.miou}, {"accuracy", r.accuracy},
                                    {"train_images", train.size()}, {"test_images", test.size()},
                                    {"train_patches", r.train_patches}, {"test_patches", r.test_patches}};
                for (double v : r.iou) j["iou"].push_back(std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v));
                std::cout << j.dump(1) << "\n";
            } else {
                std::cout << std::fixed << std::setprecision(3) << "mIoU " << r.miou << "  patch accuracy " << r.accuracy << "  ("
                          << train.size() << " train / " << test.size() << " test images, " << classes << " classes)\n";
                for (std::size_t k = 0; k < r.iou.size(); ++k) std::cout << "  class " << k << "  IoU " << r.iou[k] << "\n";
            }
            return 0;
        };
    });
}

}  // namespace vitreg::cli
