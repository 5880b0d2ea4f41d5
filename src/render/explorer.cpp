#include "vitreg/render/explorer.hpp"

#include <algorithm>
#include <cstdio>
#include <opencv2/imgproc.hpp>

#include "vitreg/error.hpp"
#include "vitreg/analysis/rollout.hpp"
#include "vitreg/render/label_text.hpp"
#include "vitreg/render/views.hpp"
#include "text_format.hpp"

namespace vitreg::render {

namespace {

constexpr int kMainSide = 448, kTileSide = 150, kStatusHeight = 44;

std::string head_name(int head) {
    return head == ViewState::kMeanHead ? "mean" : head == ViewState::kMaxHead ? "max" : std::to_string(head);
}

// The shown row of a query: one head, or the heads fused.
std::vector<float> shown_row(const QueryAttention& a, int heads, int tokens, int head) {
    if (head >= 0) return std::vector<float>(a.rows.begin() + head * tokens, a.rows.begin() + (head + 1) * tokens);
    return fuse_heads(a.rows.data(), heads, tokens, head == ViewState::kMaxHead ? HeadFusion::Max : HeadFusion::Mean);
}

cv::Mat blend(const cv::Mat& image, const float* grid, const Trace& t, float vmin, float vmax, Colormap map, float opacity) {
    return overlay(image, grid, t.grid_h, t.grid_w, vmin, vmax, map, opacity);
}

void mark_query(cv::Mat& canvas, const Trace& t, int query) {
    const int p = query - t.patch_offset();
    if (p >= 0 && p < t.patch_count()) outline_cells(canvas, t.grid_h, t.grid_w, {{p / t.grid_w, p % t.grid_w}}, cv::Scalar(0, 255, 255));
}

}  // namespace

ViewMode parse_view_mode(const std::string& s) {
    if (s == "attention") return ViewMode::Attention;
    if (s == "norms") return ViewMode::Norms;
    if (s == "abstention") return ViewMode::Abstention;
    if (s == "rollout") return ViewMode::Rollout;
    throw UsageError("unknown view mode '" + s + "' (expected attention, norms, abstention or rollout)");
}

std::string to_string(ViewMode m) {
    switch (m) {
        case ViewMode::Attention: return "attention";
        case ViewMode::Norms: return "norms";
        case ViewMode::Abstention: return "abstention";
        case ViewMode::Rollout: return "rollout";
    }
    return "?";
}

Exploration::Exploration(const Model& model, std::string label, const Pixels& pixels, int threads, std::int64_t max_tokens,
                         const ArtifactRule& rule)
    : model_(&model), label_(std::move(label)), rule_(rule) {
    const int depth = model.config().depth;
    Probe p = Probe::statistics(depth);
    p.qkv_layers = resolve_layers("all", depth);
    rule.ask(p);
    model.forward(pixels.chw.data(), 1, pixels.height, pixels.width, p, trace_, ForwardOptions{threads, max_tokens});
    ArtifactRules rules;
    rules.rule = rule;
    stats_ = image_stats(trace_, 0, rules);
    input_ = input_image(pixels, model.config().mean, model.config().std);
    image_ = fit(input_, kMainSide);
}

QueryAttention Exploration::rows(int layer, int query) const {
    auto it = rows_.find({layer, query});
    if (it != rows_.end()) return it->second;
    QueryAttention a = query_attention(*model_, trace_, layer, 0, query);
    const std::size_t bytes = (a.rows.size() + a.abstention.size()) * sizeof(float);
    if (row_bytes_ + bytes > kRowCacheBytes) {
        rows_.clear();
        row_bytes_ = 0;
    }
    row_bytes_ += bytes;
    return rows_.emplace(std::make_pair(layer, query), std::move(a)).first->second;
}

const std::vector<std::vector<float>>& Exploration::fused() const {
    if (fused_.empty())
        for (int l = 0; l < trace_.layers; ++l) fused_.push_back(mean_attention(*model_, trace_, l, 0));
    return fused_;
}

const std::vector<double>& Exploration::rollout() const {
    if (rollout_.empty()) rollout_ = vitreg::rollout(fused(), trace_.tokens, 0.0f);
    return rollout_;
}

std::vector<float> Exploration::rollout_rows(const std::vector<int>& queries) const {
    return vitreg::rollout_rows(fused(), trace_.tokens, queries);
}

std::string describe(const Exploration& e, const ViewState& s) {
    const Trace& t = e.trace();
    const QueryAttention& a = e.rows(s.layer, s.query);
    const auto row = shown_row(a, t.heads, t.tokens, s.head);
    double on_regs = 0;
    for (int r = 0; r < t.registers; ++r) on_regs += row[t.register_offset() + r];
    double abst = 0;
    if (s.head >= 0) {
        abst = a.abstention[s.head];
    } else {
        for (float v : a.abstention) abst = s.head == ViewState::kMaxHead ? std::max<double>(abst, v) : abst + v / t.heads;
    }
    std::string query;
    const int reg = s.query - t.register_offset();
    if (t.class_token && s.query == 0) query = "cls";
    else if (s.query < t.patch_offset())
        query = "reg:" + std::to_string(reg) + (reg >= t.registers - t.test_time_registers ? " (test-time)" : "");
    else query = "patch:" + std::to_string((s.query - t.patch_offset()) / t.grid_w) + "," + std::to_string((s.query - t.patch_offset()) % t.grid_w);
    return e.label() + " | " + to_string(s.mode) + " | layer " + std::to_string(s.layer) + "/" + std::to_string(t.layers - 1) +
           " | head " + head_name(s.head) + " | query " + query + fmt(" | norm %.2f", t.norms_of(s.layer, 0)[s.query]) +
           (t.class_token ? fmt(" | on CLS %.3f", row[0]) : std::string()) + fmt(" | on registers %.3f", on_regs) + fmt(" | abstention %.3f", abst);
}

cv::Mat render_view(const Exploration& e, const ViewState& s) {
    const Trace& t = e.trace();
    const cv::Mat& img = e.image();
    cv::Mat main;
    std::vector<cv::Mat> panel;
    std::vector<std::string> captions;
    const QueryAttention& a = e.rows(s.layer, s.query);
    switch (s.mode) {
        case ViewMode::Attention:
        case ViewMode::Rollout: {
            if (s.mode == ViewMode::Attention) {
                const auto row = shown_row(a, t.heads, t.tokens, s.head);
                const auto grid = patch_grid(row.data(), t);
                main = blend(img, grid.data(), t, 0.0f, std::max(1e-12f, *std::max_element(grid.begin(), grid.end())), Colormap::Inferno,
                             s.opacity);
            } else {
                const auto& r = e.rollout();
                std::vector<float> row(r.begin() + static_cast<std::ptrdiff_t>(s.query) * t.tokens,
                                       r.begin() + static_cast<std::ptrdiff_t>(s.query + 1) * t.tokens);
                const auto grid = patch_grid(row.data(), t);
                main = blend(img, grid.data(), t, 0.0f, std::max(1e-12f, *std::max_element(grid.begin(), grid.end())), Colormap::Inferno,
                             s.opacity);
            }
            for (int h = 0; h < t.heads; ++h) {
                const auto grid = patch_grid(a.rows.data() + static_cast<std::size_t>(h) * t.tokens, t);
                panel.push_back(blend(fit(img, kTileSide), grid.data(), t, 0.0f,
                                      std::max(1e-12f, *std::max_element(grid.begin(), grid.end())), Colormap::Inferno, s.opacity));
                captions.push_back("head " + std::to_string(h) + (h == s.head ? " *" : ""));
            }
            break;
        }
        case ViewMode::Norms: {
            float vmax = 0;
            for (const auto& l : e.stats().layers) vmax = std::max(vmax, l.norm_max);
            main = norms_tile(img, t.norms_of(s.layer, 0), t, 0.0f, vmax, e.stats().layers[s.layer].artifact_tokens_flagged);
            for (int l = 0; l < t.layers; ++l) {
                panel.push_back(norms_tile(fit(img, kTileSide), t.norms_of(l, 0), t, 0.0f, vmax, e.stats().layers[l].artifact_tokens_flagged));
                captions.push_back("layer " + std::to_string(l) + (l == s.layer ? " *" : ""));
            }
            break;
        }
        case ViewMode::Abstention: {
            std::vector<float> mean(static_cast<std::size_t>(t.tokens), 0.0f);
            for (int h = 0; h < t.heads; ++h) {
                const float* ab = t.abstention_of(s.layer, 0, h);
                for (int k = 0; k < t.tokens; ++k)
                    mean[k] = s.head == ViewState::kMaxHead ? std::max(mean[k], ab[k]) : mean[k] + ab[k] / t.heads;
                const auto grid = patch_grid(ab, t);
                panel.push_back(blend(fit(img, kTileSide), grid.data(), t, 0.0f, 1.0f, Colormap::Magma, s.opacity));
                captions.push_back("head " + std::to_string(h) + (h == s.head ? " *" : ""));
            }
            const float* shown = s.head >= 0 ? t.abstention_of(s.layer, 0, s.head) : mean.data();
            const auto grid = patch_grid(shown, t);
            main = blend(img, grid.data(), t, 0.0f, 1.0f, Colormap::Magma, s.opacity);
            break;
        }
    }
    mark_query(main, t, s.query);
    for (std::size_t i = 0; i < panel.size(); ++i) caption(panel[i], captions[i]);
    // Small multiples two per row beside the main map.
    std::vector<std::vector<cv::Mat>> rows;
    for (std::size_t i = 0; i < panel.size(); ++i) {
        if (i % 2 == 0) rows.emplace_back();
        rows.back().push_back(panel[i]);
    }
    const cv::Mat side = labelled_grid(rows, {}, {}, "");
    const int width = main.cols + side.cols, height = std::max(main.rows, side.rows) + kStatusHeight;
    cv::Mat out(height, width, CV_8UC3, cv::Scalar(255, 255, 255));
    main.copyTo(out(cv::Rect(0, 0, main.cols, main.rows)));
    side.copyTo(out(cv::Rect(main.cols, 0, side.cols, side.rows)));
    cv::rectangle(out, cv::Point(0, height - kStatusHeight), cv::Point(width - 1, height - 1), cv::Scalar(40, 40, 40), cv::FILLED);
    // The status line in two rows: where we are | what the query's token does.
    const std::string text = describe(e, s);
    const auto cut = text.find(" | norm");
    const std::string lines[2] = {text.substr(0, cut), cut == std::string::npos ? "" : text.substr(cut + 3)};
    for (int i = 0; i < 2; ++i)
        cv::putText(out, drawable_label(lines[i]), cv::Point(6, height - kStatusHeight + 17 + 18 * i), cv::FONT_HERSHEY_SIMPLEX, 0.42,
                    cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
    return out;
}

int token_at(const Exploration& e, int x, int y) {
    const Trace& t = e.trace();
    const cv::Mat& img = e.image();
    if (x < 0 || y < 0 || x >= img.cols || y >= img.rows) return -1;
    const int r = y * t.grid_h / img.rows, c = x * t.grid_w / img.cols;
    return t.patch_offset() + r * t.grid_w + c;
}

}  // namespace vitreg::render
