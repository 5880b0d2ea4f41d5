// vitreg dense MODEL INPUT... -o OUT_DIR: per-patch feature grids aligned to pixels, for segmentation;
// durable, resumable and shardable like extract.
#include <iostream>

#include "common.hpp"
#include "vitreg/dense.hpp"

namespace vitreg::cli {

void register_dense(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("dense", "per-patch feature grids of chosen layers, aligned to pixels");
    struct Args : BatchArgs {
        std::string layers = "last", upsample = "none", dtype = "f32", scales = "1", grid, pca, pca_mask;
        bool norm = false, concat = false, pca_joint = false, flip = false;
        int window = 0, stride = 0, pca_dims = 0;
        JbuOptions jbu;
        ArtifactRule rule;
    };
    auto a = std::make_shared<Args>();
    a->batch = 1;
    add_batch_args(*cmd, *a);
    cmd->add_option("--layers", a->layers, "last | -4,-3,-2,-1 | i,j,... (like get_intermediate_layers)")->capture_default_str();
    cmd->add_flag("--norm", a->norm, "apply the final LayerNorm to the chosen layers");
    cmd->add_flag("--concat", a->concat, "one [h, w, layers*D] array instead of [layers, h, w, D]");
    cmd->add_option("--window", a->window, "sliding window: crops of this many pixels (a multiple of the patch), "
                                           "each crop's grid pasted into the image's and averaged where they overlap");
    cmd->add_option("--stride", a->stride, "pixels between crops (a multiple of the patch, at most --window; default: --window)");
    cmd->add_option("--image-scales", a->scales, "run the image at each scale (e.g. 0.5,1,1.5), grids resized to one and averaged")
        ->capture_default_str();
    cmd->add_flag("--flip", a->flip, "also run each scale mirrored left-right (its grid mirrored back) and average");
    cmd->add_option("--grid", a->grid, "the common grid HxW in cells (default: the image's own patch grid)");
    cmd->add_option("--upsample", a->upsample,
                    "none | image | xN (bilinear to the input's pixels or N times the grid) | bilinear | jbu | "
                    "bilinear:SIZE | jbu:SIZE (jbu: joint bilateral upsampling guided by the image)")
        ->capture_default_str();
    cmd->add_option("--jbu-sigma-spatial", a->jbu.sigma_spatial, "JBU's spatial sigma, in grid cells")->capture_default_str();
    cmd->add_option("--jbu-sigma-range", a->jbu.sigma_range, "JBU's range sigma, in RGB intensity [0, 1]")->capture_default_str();
    cmd->add_option("--jbu-radius", a->jbu.radius, "JBU's window: the (2r+1)^2 cells around each pixel's own")->capture_default_str();
    cmd->add_option("--dtype", a->dtype, "f32 or f16")->check(CLI::IsMember({"f32", "f16"}))->capture_default_str();
    auto* pca = cmd->add_option("--pca", a->pca,
                                "write <row>.pca.png: the input beside a PCA colouring of its patch features; "
                                "--pca foreground: DINOv3's (3 components fitted on the foreground, whitened, "
                                "sigmoid(2x), background dimmed), through the chosen --upsample")
                    ->expected(0, 1)
                    ->check(CLI::IsMember({"", "preview", "foreground"}));
    cmd->add_option("--pca-mask", a->pca_mask,
                    "the foreground of --pca foreground: a mask PNG (nonzero = foreground) for every input, or a "
                    "folder with <stem>.png per input; the image's, its model input's or its grid's size; a patch is "
                    "foreground when at least half its pixels are");
    cmd->add_option("--pca-dims", a->pca_dims,
                    "write K principal components of the chosen layers side by side instead of every channel "
                    "([h, w, K]), reduced before upsampling, with the basis in <row>.pca_basis.safetensors")
        ->capture_default_str();
    cmd->add_flag("--pca-joint", a->pca_joint,
                  "fit the PCAs (the --pca picture, --pca-dims' reduction) jointly over each --batch of images");
    add_artifact_rule_args(*cmd, a->rule);
    cmd->get_option("--artifact-rule")
        ->description("write <row>.artifacts.npy, [layers, h, w] float32, 1 where the rule flags the patch: "
                      "norm | direction | both (as compare's)");
    cmd->callback([&run, a, pca, cmd] {
        const bool pca_given = pca->count() > 0;
        const bool rule_given = cmd->get_option("--artifact-rule")->count() > 0;
        run = [a, pca_given, rule_given] {
            DenseOptions o;
            fill_batch_options(*a, o);
            o.layers = a->layers;
            o.norm = a->norm;
            o.concat = a->concat;
            o.parse_upsample(a->upsample);
            o.view.window = a->window;
            o.view.stride = a->stride;
            o.view.parse_scales(a->scales);
            o.view.flip = a->flip;
            if (!a->grid.empty()) o.view.parse_grid(a->grid);
            o.jbu = a->jbu;
            o.half = a->dtype == "f16";
            o.pca_dims = a->pca_dims;
            o.pca = pca_given || (a->pca_joint && a->pca_dims == 0);  // --pca-joint alone: the joint preview
            o.pca_mask.path = a->pca_mask;
            o.pca_foreground = a->pca == "foreground";
            o.pca_joint = a->pca_joint;
            if (rule_given) o.artifact_rule = a->rule;
            const auto inputs = batch_inputs(*a);
            const Model m = load_model(a->model);
            const auto s = dense_features(m, inputs, o, ProgressBar());
            return report_batch(s.ok, s.failed, s.inputs, "dense features", shard_dir(o.out_dir, o.shard_index, o.shard_count));
        };
    });
}

}  // namespace vitreg::cli
