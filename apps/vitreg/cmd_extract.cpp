// vitreg extract MODEL INPUT... -o OUT_DIR: batch feature extraction, durable and resumable.
#include <cstdlib>
#include <iostream>

#include "common.hpp"
#include "parse_shard.hpp"
#include "vitreg/error.hpp"
#include "vitreg/extract.hpp"

namespace vitreg::cli {

void register_extract(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("extract", "write CLS / pooled / register (/ patch) features of images");
    struct Args : BatchArgs {
        bool patch_tokens = false, resume = false, overwrite = false;
        std::size_t chunk = 256;
        std::string shard;
        int shard_count = 0;
    };
    auto a = std::make_shared<Args>();
    add_batch_args(*cmd, *a);
    cmd->add_flag("--patch-tokens", a->patch_tokens, "also write patch/<row> [h, w, D] per image");
    cmd->add_flag("--resume", a->resume, "continue the run that OUT holds (or finish it); starts one if there is none");
    cmd->add_flag("--overwrite", a->overwrite, "replace what OUT holds when it is another run (vitreg's files only)");
    cmd->add_option("--chunk", a->chunk, "inputs per durable chunk: a killed run loses at most one")
        ->check(CLI::Range(std::size_t(1), std::size_t(1) << 20))
        ->capture_default_str();
    cmd->add_option("--shard", a->shard,
                    "K/N: take block K (0-based) of N of the sorted inputs, into OUT/shard-K-of-N; 'auto' reads "
                    "SLURM_ARRAY_TASK_ID/COUNT or JOB_COMPLETION_INDEX (with --shard-count)");
    cmd->add_option("--shard-count", a->shard_count,
                    "N for --shard auto: needed with JOB_COMPLETION_INDEX (Kubernetes) and when resubmitting single "
                    "Slurm array tasks")
        ->check(CLI::Range(1, 1 << 20));
    cmd->callback([&run, a] {
        run = [a] {
            ExtractOptions o;
            fill_batch_options(*a, o);
            o.patch_tokens = a->patch_tokens;
            o.chunk_rows = a->chunk;
            o.resume = a->resume;
            o.overwrite = a->overwrite;
            if (!a->shard.empty()) {
                const Shard s = parse_shard(a->shard, a->shard_count);
                o.shard_index = s.index;
                o.shard_count = s.count;
            }
            const auto inputs = batch_inputs(*a);
            const Model m = load_model(a->model);
            const auto s = extract_features(m, inputs, o, ProgressBar());
            return report_batch(s.ok, s.failed, s.inputs, "features", shard_dir(o.out_dir, o.shard_index, o.shard_count));
        };
    });
}

}  // namespace vitreg::cli
