#pragma once
// The standard pictures of a Trace, shared by `vitreg maps`, `vitreg compare` and the viewer.
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "vitreg/probe.hpp"
#include "vitreg/render/render.hpp"
#include "vitreg/analysis/rollout.hpp"
#include "vitreg/analysis/stats.hpp"

namespace vitreg::render {

// The patch part of per-token values (token order [CLS, registers, patches]) as a grid.
std::vector<float> patch_grid(const float* token_values, const Trace& trace);
std::vector<std::pair<int, int>> patch_cells(const std::vector<int>& tokens, const Trace& trace);

// `image` scaled so its longer side is `side` px (keeps the aspect ratio).
cv::Mat fit(const cv::Mat& image, int side);

// One attention row over the patches, scaled to [0, its max], on the image.
cv::Mat attention_tile(const cv::Mat& image, const float* row, const Trace& trace);
// Patch norms on the image with a given scale; artifact tokens outlined.
cv::Mat norms_tile(const cv::Mat& image, const float* norms, const Trace& trace, float vmin, float vmax,
                   const std::vector<int>& artifact_tokens);

// Columns: the heads (when `each_head`) then the fused column; rows: the layers. Needs the
// query's rows in those layers.
cv::Mat attention_grid(const cv::Mat& image, const Trace& trace, const std::vector<int>& layers, int query_token,
                       bool each_head, HeadFusion fusion, const std::string& title);
// The same, one row: the attention-pool head's probe query (Probe::pool_attention, SigLIP's MAP).
cv::Mat pool_attention_grid(const cv::Mat& image, const Trace& trace, bool each_head, HeadFusion fusion,
                            const std::string& title);
// One norm heatmap per layer on a shared colour scale, artifacts outlined, with a colour bar.
cv::Mat norms_grid(const cv::Mat& image, const Trace& trace, const std::vector<int>& layers, const ImageStats& stats,
                   const std::string& title);
// Per head (columns) and layer (rows): each query patch's abstention mass, scale [0, 1].
cv::Mat abstention_grid(const cv::Mat& image, const Trace& trace, const std::vector<int>& layers, const std::string& title);

}  // namespace vitreg::render
