// vitreg merge OUT_DIR: the shards of `vitreg extract|dense --shard K/N` joined into one result.
#include <iostream>

#include "common.hpp"
#include "vitreg/merge.hpp"

namespace vitreg::cli {

void register_merge(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("merge", "join OUT/shard-K-of-N/ into the files a single run writes");
    auto out = std::make_shared<std::string>();
    cmd->add_option("OUT", *out, "the folder given to extract or dense --shard as -o")->required();
    cmd->callback([&run, out] {
        run = [out] {
            const MergeSummary s = merge_shards(*out);
            status_out() << "vitreg: merged " << s.shards << " shards\n";
            return report_batch(s.rows.ok, s.rows.failed, s.rows.inputs, "results", *out);
        };
    });
}

}  // namespace vitreg::cli
