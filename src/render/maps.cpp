#include "vitreg/render/maps.hpp"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "vitreg/error.hpp"
#include "vitreg/probe.hpp"
#include "vitreg/analysis/inspect.hpp"
#include "vitreg/analysis/rollout.hpp"
#include "vitreg/render/render.hpp"
#include "vitreg/render/views.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::render {

namespace {

// The options resolved against the model: everything decided before any pixel is read.
struct MapsPlan {
    ArtifactRules rules;  // the rule ready for the model (its directions read or computed)
    bool pool_query = false;  // `probe`: the attention-pool head's query, which is no token of the sequence
    TokenRef query;
    std::string query_name;
    std::vector<int> layers;
    bool each_head = true;
    HeadFusion fusion = HeadFusion::Mean;
};

MapsPlan plan_maps(const Model& m, const MapsOptions& o) {
    MapsPlan p;
    if (!(o.discard >= 0.0f && o.discard <= 0.99f))
        throw UsageError("maps: discard " + std::to_string(o.discard) + " is outside [0, 0.99]");
    p.pool_query = o.query == "probe";
    if (!p.pool_query) p.query = TokenRef::parse(o.query);
    p.query_name = p.pool_query ? std::string("probe") : p.query.to_string();
    if (p.pool_query && o.rollout) throw UsageError("maps: rollout follows a token's attention down the layers; the probe query has none");
    p.layers = resolve_layers(o.layers, m.config().depth);
    p.each_head = o.heads == "all";
    if (!p.each_head && o.heads != "mean" && o.heads != "max" && o.heads != "min")
        throw UsageError("maps: heads '" + o.heads + "' (expected all, mean, max or min)");
    p.fusion = p.each_head ? HeadFusion::Mean : parse_head_fusion(o.heads);
    p.rules = o.rules;
    p.rules.rule = o.rules.rule.for_model(m);
    return p;
}

// The image through the model with the probe every statistic reads, plus the query's rows.
struct MapsRun {
    Pixels pixels;
    Trace trace;
    int query_token = -1;  // -1: the probe query
};

MapsRun run_maps(const Model& m, const std::string& image, const MapsOptions& o, const MapsPlan& p) {
    const Config& c = m.config();
    MapsRun r;
    r.pixels = load_pixels(image, o.resize, c, o.image_limits);
    m.check_tokens(r.pixels.height, r.pixels.width, o.max_tokens, image);
    const int gh = r.pixels.height / c.patch, gw = r.pixels.width / c.patch;
    if (!p.pool_query) r.query_token = p.query.token_index(m.registers(), gh, gw, c.class_token);

    Probe probe = Probe::statistics(c.depth);
    if (r.query_token > 0) probe.queries.push_back(r.query_token);
    probe.pool_attention = p.pool_query;
    probe.all_queries = o.rollout;
    p.rules.rule.ask(probe);
    m.forward(r.pixels.chw.data(), 1, r.pixels.height, r.pixels.width, probe, r.trace, ForwardOptions{o.threads, o.max_tokens});
    return r;
}

// "cls attention, softmax1 (retrofit), evict=sink": the attention picture's title and the CLI's line.
std::string describe(const Model& m, const std::string& query_name) {
    const Config& c = m.config();
    return query_name + " attention, " + to_string(c.attention) + (c.retrofit() ? " (retrofit)" : "") +
           (m.intervention().empty() ? "" : ", " + m.intervention().to_string());
}

nlohmann::json maps_stats_json(const Model& m, const std::string& image, const MapsPlan& p, const ImageStats& stats,
                               const Trace& t) {
    nlohmann::json j = stats_json(stats, p.rules, t);
    j["image"] = image;
    j["model"] = m.path();
    j["attention"] = to_string(m.config().attention);
    j["precision"] = m.precision().describe();
    j["intervention"] = m.intervention().to_string();
    j["retrofit"] = m.config().retrofit();
    j["query"] = p.query_name;
    return j;
}

// attention.npy: the query's rows in the chosen layers, [layers, heads, 1, tokens]; for the probe
// the pool head in place of the layers, [1, heads, 1, tokens].
MapsArray attention_array(const Trace& t, const MapsPlan& p, int query_token) {
    if (p.pool_query) return {{1, t.heads, 1, t.tokens}, t.pool_attention};
    MapsArray a{{static_cast<std::int64_t>(p.layers.size()), t.heads, 1, t.tokens}, {}};
    for (int l : p.layers)
        for (int h = 0; h < t.heads; ++h) {
            const float* row = t.attention_row(t.attention_slot(l), 0, h, t.query_slot(query_token));
            a.values.insert(a.values.end(), row, row + t.tokens);
        }
    return a;
}

// rollout.png: the query's row of the rollout over every layer, on the image.
cv::Mat rollout_picture(const cv::Mat& image, const Trace& t, const MapsPlan& p, float discard, int query_token) {
    const auto r = rollout(t, 0, p.fusion, discard);
    const auto begin = r.begin() + static_cast<std::ptrdiff_t>(query_token) * t.tokens;
    const std::vector<float> row(begin, begin + t.tokens);
    cv::Mat tile = attention_tile(image, row.data(), t);
    caption(tile, "rollout of " + p.query.to_string() + ", " + to_string(p.fusion) + " of heads");
    return tile;
}

using NamedPicture = std::pair<std::string, cv::Mat>;

// The PNGs, by file name, in the order they are written.
std::vector<NamedPicture> maps_pictures(const Model& m, const MapsOptions& o, const MapsPlan& p, const MapsRun& run,
                                        const MapsResult& result) {
    const Config& c = m.config();
    const Trace& t = run.trace;
    const cv::Mat image = fit(input_image(run.pixels, c.mean, c.std), 224);
    std::vector<NamedPicture> pictures;
    pictures.emplace_back("attention.png", p.pool_query
                                               ? pool_attention_grid(image, t, p.each_head, p.fusion, result.description)
                                               : attention_grid(image, t, p.layers, run.query_token, p.each_head, p.fusion,
                                                                result.description));
    pictures.emplace_back("norms.png", norms_grid(image, t, p.layers, result.stats, "patch norms, outlined: " + p.rules.rule.describe()));
    const LayerStats& out_layer = result.stats.layers.back();
    pictures.emplace_back("histogram.png",
                          histogram(patch_grid(t.norms_of(c.depth - 1, 0), t), 40,
                                    {{out_layer.robust_threshold, "median+k*MAD"}, {p.rules.norm_threshold, "absolute"}},
                                    "patch norms at the output layer", "L2 norm"));
    if (c.attention != AttentionKind::Softmax)
        pictures.emplace_back("abstention.png", abstention_grid(image, t, p.layers, to_string(c.attention)));
    if (o.rollout) pictures.emplace_back("rollout.png", rollout_picture(image, t, p, o.discard, run.query_token));
    return pictures;
}

// Writes the pictures, stats.json and the arrays asked for into o.out; lists them in result.written.
void write_outputs(const MapsOptions& o, const std::vector<NamedPicture>& pictures, MapsResult& result) {
    make_dirs(o.out);
    const std::string dir = o.out + "/";
    const auto written = [&](const std::string& name) { return result.written.emplace_back(dir + name); };
    for (const auto& [name, picture] : pictures) write_png(written(name), picture);
    write_file_atomic(written("stats.json"), result.stats_json.dump(1) + "\n");
    if (o.save_attention)
        write_npy(written("attention.npy"), ArrayRef{result.attention.shape, result.attention.values.data()});
    if (o.save_norms) write_npy(written("norms.npy"), ArrayRef{result.norms.shape, result.norms.values.data()});
}

}  // namespace

MapsResult write_maps(const Model& model, const std::string& image, const MapsOptions& options) {
    const MapsPlan plan = plan_maps(model, options);
    const MapsRun run = run_maps(model, image, options, plan);
    const Trace& t = run.trace;
    MapsResult result;
    result.stats = image_stats(t, 0, plan.rules);
    result.stats_json = maps_stats_json(model, image, plan, result.stats, t);
    result.query = plan.query_name;
    result.description = describe(model, plan.query_name);
    result.attention = attention_array(t, plan, run.query_token);
    result.norms = {{t.layers, t.tokens}, t.norms};
    if (options.out.empty()) return result;
    // Every picture is drawn before the folder is made: a fault there leaves nothing behind.
    write_outputs(options, maps_pictures(model, options, plan, run, result), result);
    return result;
}

}  // namespace vitreg::render
