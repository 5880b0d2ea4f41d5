// vitreg maps MODEL IMAGE -o OUT_DIR: attention maps, patch-norm heatmaps and statistics of one image.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/inspect.hpp"
#include "vitreg/render/views.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::cli {

void register_maps(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("maps", "attention maps, patch-norm heatmaps and artifact statistics of one image");
    struct Args {
        ModelArgs model;
        std::string image, out, layers = "all", heads = "all", query = "cls";
        PixelArgs pixels;
        bool rollout = false, save_attention = false, save_norms = false;
        float discard = 0.0f;
        ArtifactRules rules;
        int threads = 0;
        InputLimits limits;
    };
    auto a = std::make_shared<Args>();
    add_model_args(*cmd, a->model);
    cmd->add_option("IMAGE", a->image, "the image")->required();
    cmd->add_option("-o,--out", a->out, "output folder")->required();
    cmd->add_option("--layers", a->layers, "all | last | i,j,... (negative counts from the end)")->capture_default_str();
    cmd->add_option("--heads", a->heads, "all (each head + their mean) | mean | max | min")
        ->check(CLI::IsMember({"all", "mean", "max", "min"}))
        ->capture_default_str();
    cmd->add_option("--query", a->query,
                    "cls | reg:K | patch:R,C | probe (the attention-pool head's query over the final tokens: SigLIP's MAP)")
        ->capture_default_str();
    cmd->add_flag("--rollout", a->rollout, "also write rollout.png (Abnar & Zuidema)");
    cmd->add_option("--discard", a->discard, "rollout: zero this fraction of the smallest fused weights per layer")
        ->check(CLI::Range(0.0f, 0.99f));
    add_pixel_args(*cmd, a->pixels, "eval | none | WxH | short:N | long:N");
    cmd->add_flag("--save-attention", a->save_attention, "write attention.npy [layers, heads, 1, tokens] ([1, heads, 1, tokens] for --query probe)");
    cmd->add_flag("--save-norms", a->save_norms, "write norms.npy [layers, tokens]");
    cmd->add_option("--norm-threshold", a->rules.norm_threshold, "absolute artifact threshold on token norms")->capture_default_str();
    cmd->add_option("--mad-k", a->rules.rule.mad_k, "model-free rule: norm (or |cos|) > median + k*MAD")->capture_default_str();
    add_artifact_rule_args(*cmd, a->rules.rule);
    add_table_option(*cmd, "threads", a->threads);
    add_input_limit_args(*cmd, a->limits);
    cmd->callback([&run, a] {
        run = [a] {
            const Model m = load_model(a->model);
            const Config& c = m.config();
            ArtifactRules rules = a->rules;
            rules.rule = a->rules.rule.for_model(m);
            const ResizeSpec resize = pixel_spec(a->pixels);
            // `probe`: the attention-pool head's query, which is no token of the sequence.
            const bool pool_query = a->query == "probe";
            const TokenRef query = pool_query ? TokenRef{} : TokenRef::parse(a->query);
            const std::string query_name = pool_query ? std::string("probe") : query.to_string();
            if (pool_query && a->rollout) throw UsageError("--rollout follows a token's attention down the layers; the probe query has none");
            const std::vector<int> layers = resolve_layers(a->layers, c.depth);
            const bool each_head = a->heads == "all";
            const HeadFusion fusion = each_head ? HeadFusion::Mean : parse_head_fusion(a->heads);

            // Everything that can fail on the input fails here, before any file is written.
            const Pixels px = load_pixels(a->image, resize, c, a->limits.image);
            m.check_tokens(px.height, px.width, a->limits.max_tokens, a->image);
            const int gh = px.height / c.patch, gw = px.width / c.patch;
            const int q = pool_query ? -1 : query.token_index(m.registers(), gh, gw, c.class_token);

            Probe probe = Probe::statistics(c.depth);
            if (q > 0) probe.queries.push_back(q);
            probe.pool_attention = pool_query;
            probe.all_queries = a->rollout;
            rules.rule.ask(probe);
            Trace t;
            m.forward(px.chw.data(), 1, px.height, px.width, probe, t, ForwardOptions{a->threads, a->limits.max_tokens});
            const ImageStats stats = image_stats(t, 0, rules);

            make_dirs(a->out);
            const std::string dir = a->out + "/";
            const cv::Mat image = render::fit(render::input_image(px, c.mean, c.std), 224);
            const std::string what = query_name + " attention, " + to_string(c.attention) +
                                     (c.retrofit() ? " (retrofit)" : "") +
                                     (m.intervention().empty() ? "" : ", " + m.intervention().to_string());
            render::write_png(dir + "attention.png", pool_query ? render::pool_attention_grid(image, t, each_head, fusion, what)
                                                                : render::attention_grid(image, t, layers, q, each_head, fusion, what));
            render::write_png(dir + "norms.png", render::norms_grid(image, t, layers, stats, "patch norms, outlined: " + rules.rule.describe()));
            const auto& out_layer = stats.layers.back();
            render::write_png(dir + "histogram.png",
                              render::histogram(render::patch_grid(t.norms_of(c.depth - 1, 0), t), 40,
                                                {{out_layer.robust_threshold, "median+k*MAD"}, {a->rules.norm_threshold, "absolute"}},
                                                "patch norms at the output layer", "L2 norm"));
            if (c.attention != AttentionKind::Softmax)
                render::write_png(dir + "abstention.png", render::abstention_grid(image, t, layers, to_string(c.attention)));
            if (a->rollout) {
                const auto r = rollout(t, 0, fusion, a->discard);
                std::vector<float> row(r.begin() + static_cast<std::ptrdiff_t>(q) * t.tokens,
                                       r.begin() + static_cast<std::ptrdiff_t>(q + 1) * t.tokens);
                cv::Mat tile = render::attention_tile(image, row.data(), t);
                render::caption(tile, "rollout of " + query.to_string() + ", " + to_string(fusion) + " of heads");
                render::write_png(dir + "rollout.png", tile);
            }
            nlohmann::json j = stats_json(stats, rules, t);
            j["image"] = a->image;
            j["model"] = m.path();
            j["attention"] = to_string(c.attention);
            j["precision"] = m.precision().describe();
            j["intervention"] = m.intervention().to_string();
            j["retrofit"] = c.retrofit();
            j["query"] = query_name;
            write_file_atomic(dir + "stats.json", j.dump(1) + "\n");
            if (a->save_attention && pool_query) {
                // [1, heads, 1, tokens]: the pool head in place of the layers.
                write_npy(dir + "attention.npy", ArrayRef{{1, t.heads, 1, t.tokens}, t.pool_attention.data()});
            } else if (a->save_attention) {
                // [layers, heads, 1, tokens] for the chosen layers and query.
                std::vector<float> att;
                for (int l : layers)
                    for (int h = 0; h < t.heads; ++h) {
                        const float* r = t.attention_row(t.attention_slot(l), 0, h, t.query_slot(q));
                        att.insert(att.end(), r, r + t.tokens);
                    }
                write_npy(dir + "attention.npy",
                          ArrayRef{{static_cast<std::int64_t>(layers.size()), t.heads, 1, t.tokens}, att.data()});
            }
            if (a->save_norms) write_npy(dir + "norms.npy", ArrayRef{{t.layers, t.tokens}, t.norms.data()});
            status_out() << "vitreg: maps of " << a->image << " (" << what << ") written to " << a->out << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
