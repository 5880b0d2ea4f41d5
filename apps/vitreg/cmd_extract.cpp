// vitreg extract MODEL INPUT... -o OUT_DIR: batch feature extraction, durable and resumable.
#include "common.hpp"
#include "vitreg/extract.hpp"

namespace vitreg::cli {

void register_extract(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("extract", "write CLS / pooled / register (/ patch) features of images");
    struct Args : BatchArgs {
        bool patch_tokens = false, project = false;
        std::string layout = "files";
    };
    auto a = std::make_shared<Args>();
    add_batch_args(*cmd, *a);
    cmd->add_flag("--patch-tokens", a->patch_tokens, "also write patch/<row> [h, w, D] per image");
    cmd->add_flag("--project", a->project,
                  "also write embedding [E] = cls · proj, unnormalized (models with a projection: CLIP)");
    cmd->add_option("--layout", a->layout,
                    "files: whole-job cls.npy, ...; shards (tar inputs): per input shard NNNNN.cls.npy, ... "
                    "(or NNNNN.safetensors), NNNNN.keys.jsonl (and NNNNN.patch.safetensors)")
        ->check(CLI::IsMember({"files", "shards"}))
        ->capture_default_str();
    cmd->callback([&run, a] {
        run = [a] {
            ExtractOptions o;
            fill_batch_options(*a, o);
            o.patch_tokens = a->patch_tokens;
            o.project = a->project;
            o.shard_layout = a->layout == "shards";
            const auto inputs = batch_inputs(*a);
            const Model m = load_model(a->model);
            const ProgressBar bar;
            o.stage_progress = bar.stage_sink();
            const auto s = extract_features(m, inputs, o, bar);
            return report_batch(s.ok, s.failed, s.inputs, "features", shard_dir(o.out_dir, o.shard_index, o.shard_count));
        };
    });
}

}  // namespace vitreg::cli
