// vitreg dense MODEL INPUT... -o OUT_DIR: per-patch feature grids aligned to pixels, for segmentation;
// durable, resumable and shardable like extract.
#include <iostream>

#include "common.hpp"
#include "vitreg/dense_options.hpp"

namespace vitreg::cli {

void register_dense(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("dense", "per-patch feature grids of chosen layers, aligned to pixels");
    struct Args : BatchArgs {
        GivenOptions dense;  // of dense_option_table()
        std::string pca, pca_mask;
        bool pca_joint = false;
        ArtifactRule rule;
    };
    auto a = std::make_shared<Args>();
    const DenseOptions defaults;
    add_batch_args(*cmd, *a, defaults);
    add_table_options(*cmd, dense_option_table(), defaults, a->dense);
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
            apply_given(dense_option_table(), a->dense, o);
            o.pca = pca_given || (a->pca_joint && o.pca_dims == 0);  // --pca-joint alone: the joint preview
            o.pca_mask.path = a->pca_mask;
            o.pca_foreground = a->pca == "foreground";
            o.pca_joint = a->pca_joint;
            if (rule_given) o.artifact_rule = a->rule;
            const auto inputs = batch_inputs(*a);
            const Model m = load_model(a->model);
            const ProgressBar bar;
            o.stage_progress = bar.stage_sink();
            const auto s = dense_features(m, inputs, o, bar);
            return report_batch(s.ok, s.failed, s.inputs, "dense features", shard_dir(o.out_dir, o.shard_index, o.shard_count));
        };
    });
}

}  // namespace vitreg::cli
