// vitreg dense MODEL INPUT... -o OUT_DIR: per-patch feature grids aligned to pixels, for segmentation;
// durable, resumable and shardable like extract.
#include <iostream>

#include "common.hpp"
#include "vitreg/dense.hpp"

namespace vitreg::cli {

void register_dense(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("dense", "per-patch feature grids of chosen layers, aligned to pixels");
    struct Args : BatchArgs {
        std::string layers = "last", upsample = "none", dtype = "f32";
        bool norm = false, concat = false, pca = false, pca_joint = false;
    };
    auto a = std::make_shared<Args>();
    a->batch = 1;
    add_batch_args(*cmd, *a);
    cmd->add_option("--layers", a->layers, "last | -4,-3,-2,-1 | i,j,... (like get_intermediate_layers)")->capture_default_str();
    cmd->add_flag("--norm", a->norm, "apply the final LayerNorm to the chosen layers");
    cmd->add_flag("--concat", a->concat, "one [h, w, layers*D] array instead of [layers, h, w, D]");
    cmd->add_option("--upsample", a->upsample, "none | image (bilinear to the input size) | xN")->capture_default_str();
    cmd->add_option("--dtype", a->dtype, "f32 or f16")->check(CLI::IsMember({"f32", "f16"}))->capture_default_str();
    cmd->add_flag("--pca", a->pca, "write <row>.pca.png: the input beside a PCA colouring of its patch features");
    cmd->add_flag("--pca-joint", a->pca_joint, "fit the PCA jointly over each --batch of images");
    cmd->callback([&run, a] {
        run = [a] {
            DenseOptions o;
            fill_batch_options(*a, o);
            o.layers = a->layers;
            o.norm = a->norm;
            o.concat = a->concat;
            o.parse_upsample(a->upsample);
            o.half = a->dtype == "f16";
            o.pca = a->pca || a->pca_joint;
            o.pca_joint = a->pca_joint;
            const auto inputs = batch_inputs(*a);
            const Model m = load_model(a->model);
            resolve_layers(o.layers, m.config().depth);  // a bad --layers fails before any output
            const auto s = dense_features(m, inputs, o, ProgressBar());
            return report_batch(s.ok, s.failed, s.inputs, "dense features", shard_dir(o.out_dir, o.shard_index, o.shard_count));
        };
    });
}

}  // namespace vitreg::cli
