// vitreg dense MODEL INPUT... -o OUT_DIR: per-patch feature grids aligned to pixels, for segmentation.
#include <iostream>

#include "common.hpp"
#include "vitreg/dense.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"

namespace vitreg::cli {

void register_dense(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("dense", "per-patch feature grids of chosen layers, aligned to pixels");
    struct Args {
        ModelArgs model;
        std::vector<std::string> inputs;
        std::string out, resize = "eval", layers = "last", upsample = "none", format = "npy", dtype = "f32";
        bool norm = false, concat = false, pca = false, pca_joint = false;
        int batch = 1, threads = 0;
    };
    auto a = std::make_shared<Args>();
    add_model_args(*cmd, a->model);
    cmd->add_option("INPUT", a->inputs, "image files, folders (recursive, sorted) or @list.txt")->required();
    cmd->add_option("-o,--out", a->out, "output folder")->required();
    cmd->add_option("--layers", a->layers, "last | -4,-3,-2,-1 | i,j,... (like get_intermediate_layers)")->capture_default_str();
    cmd->add_flag("--norm", a->norm, "apply the final LayerNorm to the chosen layers");
    cmd->add_flag("--concat", a->concat, "one [h, w, layers*D] array instead of [layers, h, w, D]");
    cmd->add_option("--upsample", a->upsample, "none | image (bilinear to the input size) | xN")->capture_default_str();
    cmd->add_option("--resize", a->resize, "eval | none | WxH | short:N | long:N (long:N suits dense work)")->capture_default_str();
    cmd->add_option("--format", a->format, "npy or safetensors")->check(CLI::IsMember({"npy", "safetensors"}))->capture_default_str();
    cmd->add_option("--dtype", a->dtype, "f32 or f16")->check(CLI::IsMember({"f32", "f16"}))->capture_default_str();
    cmd->add_flag("--pca", a->pca, "write <row>.pca.png: the input beside a PCA colouring of its patch features");
    cmd->add_flag("--pca-joint", a->pca_joint, "fit the PCA jointly over each --batch of images");
    cmd->add_option("--batch", a->batch, "images per forward (and per joint PCA)")->check(CLI::Range(1, 4096))->capture_default_str();
    cmd->add_option("--threads", a->threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
    cmd->callback([&run, a] {
        run = [a] {
            DenseOptions o;
            o.out_dir = a->out;
            o.resize = ResizeSpec::parse(a->resize);
            o.layers = a->layers;
            o.norm = a->norm;
            o.concat = a->concat;
            o.parse_upsample(a->upsample);
            o.format = a->format == "npy" ? FeatureFormat::Npy : FeatureFormat::Safetensors;
            o.half = a->dtype == "f16";
            o.pca = a->pca || a->pca_joint;
            o.pca_joint = a->pca_joint;
            o.batch = a->batch;
            o.threads = a->threads;
            const auto inputs = expand_inputs(a->inputs);
            if (inputs.empty()) throw UsageError("no input images found");
            const Model m = load_model(a->model);
            resolve_layers(o.layers, m.config().depth);  // a bad --layers fails before any output
            const auto s = dense_features(m, inputs, o, ProgressBar());
            std::cerr << "vitreg: dense features of " << s.ok << " of " << s.inputs << " images in " << o.out_dir << "\n";
            if (s.failed) {
                std::cerr << "vitreg: " << s.failed << " input" << (s.failed == 1 ? "" : "s") << " failed (reasons in "
                          << o.out_dir << "/manifest.jsonl)\n";
                return 3;
            }
            return 0;
        };
    });
}

}  // namespace vitreg::cli
