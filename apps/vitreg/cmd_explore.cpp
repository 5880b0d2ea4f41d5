// vitreg explore MODEL[@KIND][@PREC][@EDIT]... --images IMAGE... -o explore.html: one
// self-contained page (no network, no server) to click any patch and see where it looks in
// every configuration, layer by layer and head by head.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "vitreg/error.hpp"
#include "vitreg/render/explore_page.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::cli {

namespace {

struct ExploreArgs {
    std::vector<std::string> models, images;
    std::string out, queries = "auto", title = "vitreg explore";
    PixelArgs pixels;
    InputLimits limits;
    double max_page_mb = 48;
    bool no_rollout = false;
    int threads = 0;
    ArtifactRule rule;
};

}  // namespace

void register_explore(CLI::App& app, Command& run) {
    auto a = std::make_shared<ExploreArgs>();
    auto* cmd = app.add_subcommand(
        "explore",
        "an attention explorer page (one HTML file, no server): any patch, layer and head, configurations side by side. "
        "ViT-S/14 reg4 at 224 px, two configurations, every query stored: about 13 MB");
    cmd->add_option("MODEL", a->models,
                    "checkpoints, each optionally @softmax|@softmax1|@sink, @fp32|@bf16|@int8|@int8=SCALES.json, "
                    "@evict=LIST and @ttr=K:NEURONS")
        ->required();
    cmd->add_option("--images", a->images, "image files, folders or @list.txt (each image is a page of the explorer)")->required();
    cmd->add_option("-o,--out", a->out, "the page to write (written whole or not at all)")->required();
    cmd->add_option("--queries", a->queries,
                    "whose attention rows the page stores: auto (all when they fit --max-page-mb, else every S-th patch), "
                    "all, cls, stride:S or R,C;R,C;... (CLS and registers always)")
        ->capture_default_str();
    cmd->add_option("--max-page-mb", a->max_page_mb, "the page's size budget in MiB, before compression")
        ->check(CLI::Range(1.0, 4096.0))
        ->capture_default_str();
    cmd->add_flag("--no-rollout", a->no_rollout, "leave the rollout rows out");
    cmd->add_option("--title", a->title, "the page's title")->capture_default_str();
    add_pixel_args(*cmd, a->pixels, "eval | none | WxH | short:N | long:N");
    add_input_limit_args(*cmd, a->limits);
    add_table_option(*cmd, "threads", a->threads);
    cmd->add_option("--mad-k", a->rule.mad_k, "outlined patches: norm (or |cos|) > median + k*MAD")->capture_default_str();
    add_artifact_rule_args(*cmd, a->rule);
    cmd->callback([&run, a] {
        run = [a] {
            render::PageOptions options;
            options.queries = render::QuerySelection::parse(a->queries);
            options.rollout = !a->no_rollout;
            options.max_bytes = static_cast<std::size_t>(a->max_page_mb * 1024 * 1024);
            options.title = a->title;
            options.max_tokens = a->limits.max_tokens;
            const auto images = expand_inputs(a->images);
            if (images.empty()) throw UsageError("no images given");
            std::vector<Configuration> loaded;
            for (const auto& spec : a->models) loaded.push_back(load_configuration(spec));
            std::vector<render::PageConfig> configs;
            for (const auto& c : loaded) configs.push_back({c.label, &c.model, a->rule.for_model(c.model)});
            const std::string page =
                render::static_explore_page(configs, images, pixel_spec(a->pixels), a->limits.image, options, a->threads,
                                            [](const std::string& note) { status_out() << "vitreg: " << note << "\n"; });
            const auto parent = std::filesystem::path(a->out).parent_path();
            if (!parent.empty()) std::filesystem::create_directories(parent);
            write_file_atomic(a->out, page);
            char size[32];
            std::snprintf(size, sizeof size, "%.1f", static_cast<double>(page.size()) / 1e6);
            status_out() << "vitreg: wrote " << a->out << " (" << size << " MB: "
                      << configs.size() << " configuration" << (configs.size() == 1 ? "" : "s") << ", " << images.size()
                      << " image" << (images.size() == 1 ? "" : "s") << ")\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
