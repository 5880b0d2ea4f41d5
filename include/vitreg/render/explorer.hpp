#pragma once
// The interactive view of vitreg-viewer, as a library: one forward per image and
// configuration, then any query's attention recomputed from the recorded q/k on demand, and
// the whole window picture rendered from a ViewState (the --snapshot mode draws the same).
#include <map>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/analysis/query_attention.hpp"
#include "vitreg/analysis/stats.hpp"

namespace vitreg::render {

enum class ViewMode { Attention, Norms, Abstention, Rollout };
ViewMode parse_view_mode(const std::string& s);  // attention | norms | abstention | rollout
std::string to_string(ViewMode m);

// What the window shows. head: 0..heads-1, or kMeanHead / kMaxHead for the fused maps.
struct ViewState {
    static constexpr int kMeanHead = -1, kMaxHead = -2;
    int config = 0;
    int layer = 0;
    int head = kMeanHead;
    int query = 0;  // token index (CLS = 0)
    ViewMode mode = ViewMode::Attention;
    float opacity = 0.6f;
};

// One configuration's look at one image.
class Exploration {
public:
    // `rule`: which patches are outlined (ready for `model`: ArtifactRule::for_model).
    Exploration(const Model& model, std::string label, const Pixels& pixels, int threads = 0,
                std::int64_t max_tokens = kDefaultMaxTokens, const ArtifactRule& rule = {});

    const std::string& label() const { return label_; }
    const Model& model() const { return *model_; }
    const Trace& trace() const { return trace_; }
    const ImageStats& stats() const { return stats_; }
    const ArtifactRule& artifact_rule() const { return rule_; }
    const cv::Mat& image() const { return image_; }  // the model input, BGR, scaled for display
    const cv::Mat& input() const { return input_; }  // the model input, BGR, as the model saw it
    // Attention of `query` in `layer`, all heads; computed from q/k on first use, then cached
    // (the cache is emptied when it outgrows kRowCacheBytes: a long session stays bounded, and
    // so the rows are returned by value). Not thread-safe: one caller at a time.
    QueryAttention rows(int layer, int query) const;
    // Rollout (mean of heads) over all layers, [tokens, tokens]; computed on first use.
    const std::vector<double>& rollout() const;
    // Rollout rows of these queries, [queries, tokens] (no N×N product formed).
    std::vector<float> rollout_rows(const std::vector<int>& queries) const;

    static constexpr std::size_t kRowCacheBytes = std::size_t(256) << 20;

private:
    const Model* model_;
    std::string label_;
    Trace trace_;
    ImageStats stats_;
    ArtifactRule rule_;
    cv::Mat image_, input_;
    mutable std::map<std::pair<int, int>, QueryAttention> rows_;
    mutable std::size_t row_bytes_ = 0;
    mutable std::vector<std::vector<float>> fused_;  // per layer: every query's rows, mean of heads
    mutable std::vector<double> rollout_;
    const std::vector<std::vector<float>>& fused() const;
};

// The window picture: the main map over the image (left), per-head or per-layer small
// multiples (right), the status line (bottom).
cv::Mat render_view(const Exploration& e, const ViewState& s);
// The status line: configuration, layer, head, query, the query token's norm and where its
// attention goes (CLS, registers, abstention).
std::string describe(const Exploration& e, const ViewState& s);
// Token of the patch under pixel (x, y) of render_view's picture, or -1 outside the image.
int token_at(const Exploration& e, int x, int y);

}  // namespace vitreg::render
