// vitreg index FEATURES -o INDEX: a FAISS index over an extract output's features.
#include <iomanip>

#include "../option_args.hpp"
#include "common.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg::cli {

void register_index(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("index", "build a FAISS index (cosine) over the features of a `vitreg extract` output folder");
    struct Args {
        std::string features, out;
        GivenOptions given;
    };
    auto a = std::make_shared<Args>();
    cmd->add_option("FEATURES", a->features, "the folder `vitreg extract -o` wrote (manifest.jsonl and the features)")
        ->required()
        ->check(CLI::ExistingDirectory);
    cmd->add_option("-o,--out", a->out, "the index folder to write (index.faiss, ids.jsonl, index.json)")->required();
    add_table_options(*cmd, index_option_table(), IndexOptions(), a->given);
    cmd->callback([&run, a] {
        run = [a] {
            IndexOptions o;
            apply_given(index_option_table(), a->given, o);
            const FeatureSource source = read_feature_source(a->features, o.feature);
            const IndexReport r = build_index(source, a->out, o);
            status_out() << "vitreg index: " << r.count << " rows of " << r.dim << " as " << r.factory << " (trained on "
                         << r.train_sample << ") in " << std::fixed << std::setprecision(1) << r.build_seconds << " s; recall@10 "
                         << std::setprecision(3) << r.recall_at_10 << " against exact search on " << r.recall_queries
                         << " held-out rows -> " << a->out << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
