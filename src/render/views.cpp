#include "vitreg/render/views.hpp"

#include <algorithm>
#include <cstdio>
#include <opencv2/imgproc.hpp>

#include "vitreg/error.hpp"
#include "text_format.hpp"

namespace vitreg::render {

namespace {

std::vector<std::string> layer_labels(const std::vector<int>& layers) {
    std::vector<std::string> out;
    for (int l : layers) out.push_back("layer " + std::to_string(l));
    return out;
}

}  // namespace

std::vector<float> patch_grid(const float* token_values, const Trace& t) {
    return std::vector<float>(token_values + t.patch_offset(), token_values + t.patch_offset() + t.patch_count());
}

std::vector<std::pair<int, int>> patch_cells(const std::vector<int>& tokens, const Trace& t) {
    std::vector<std::pair<int, int>> cells;
    for (int k : tokens) {
        const int p = k - t.patch_offset();
        if (p >= 0 && p < t.patch_count()) cells.emplace_back(p / t.grid_w, p % t.grid_w);
    }
    return cells;
}

cv::Mat fit(const cv::Mat& image, int side) {
    const double s = static_cast<double>(side) / std::max(image.cols, image.rows);
    cv::Mat out;
    cv::resize(image, out, cv::Size(std::max(1, static_cast<int>(image.cols * s + 0.5)), std::max(1, static_cast<int>(image.rows * s + 0.5))),
               0, 0, s < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
    return out;
}

cv::Mat attention_tile(const cv::Mat& image, const float* row, const Trace& t) {
    const auto grid = patch_grid(row, t);
    const float top = std::max(1e-12f, *std::max_element(grid.begin(), grid.end()));
    return overlay(image, grid.data(), t.grid_h, t.grid_w, 0.0f, top, Colormap::Inferno);
}

cv::Mat norms_tile(const cv::Mat& image, const float* norms, const Trace& t, float vmin, float vmax,
                   const std::vector<int>& artifact_tokens) {
    const auto grid = patch_grid(norms, t);
    cv::Mat tile = overlay(image, grid.data(), t.grid_h, t.grid_w, vmin, vmax, Colormap::Viridis, 0.75f);
    outline_cells(tile, t.grid_h, t.grid_w, patch_cells(artifact_tokens, t));
    return tile;
}

namespace {

// Rows of tiles, one per entry of `rows` ([heads, tokens] each): each head's map (when
// `each_head`), then the heads fused.
cv::Mat head_grid(const cv::Mat& image, const Trace& t, const std::vector<std::vector<float>>& rows, bool each_head,
                  HeadFusion fusion, const std::vector<std::string>& row_labels, const std::string& title) {
    std::vector<std::string> columns;
    if (each_head)
        for (int h = 0; h < t.heads; ++h) columns.push_back("head " + std::to_string(h));
    columns.push_back(to_string(fusion) + " of heads");
    std::vector<std::vector<cv::Mat>> tiles;
    for (const auto& r : rows) {
        std::vector<cv::Mat> row_tiles;
        if (each_head)
            for (int h = 0; h < t.heads; ++h) row_tiles.push_back(attention_tile(image, r.data() + static_cast<std::size_t>(h) * t.tokens, t));
        row_tiles.push_back(attention_tile(image, fuse_heads(r.data(), t.heads, t.tokens, fusion).data(), t));
        tiles.push_back(std::move(row_tiles));
    }
    return labelled_grid(tiles, columns, row_labels, title + " (each map scaled to its own maximum; bright = more attention)");
}

}  // namespace

cv::Mat attention_grid(const cv::Mat& image, const Trace& t, const std::vector<int>& layers, int query_token, bool each_head,
                       HeadFusion fusion, const std::string& title) {
    const int q = t.query_slot(query_token);
    std::vector<std::vector<float>> rows;
    for (int layer : layers) rows.push_back(t.query_rows(t.attention_slot(layer), 0, q));
    return head_grid(image, t, rows, each_head, fusion, layer_labels(layers), title);
}

cv::Mat pool_attention_grid(const cv::Mat& image, const Trace& t, bool each_head, HeadFusion fusion, const std::string& title) {
    if (t.pool_attention.empty()) throw UsageError("pool_attention_grid: the trace holds no attention-pool rows");
    const std::vector<float> rows(t.pool_attention_of(0, 0), t.pool_attention_of(0, 0) + static_cast<std::size_t>(t.heads) * t.tokens);
    return head_grid(image, t, {rows}, each_head, fusion, {"pool head"}, title);
}

cv::Mat norms_grid(const cv::Mat& image, const Trace& t, const std::vector<int>& layers, const ImageStats& stats,
                   const std::string& title) {
    constexpr std::size_t kPerRow = 6;
    float vmax = 0;
    for (int l : layers) vmax = std::max(vmax, stats.layers[l].norm_max);
    std::vector<std::vector<cv::Mat>> tiles;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const auto& ls = stats.layers[layers[i]];
        cv::Mat tile = norms_tile(image, t.norms_of(layers[i], 0), t, 0.0f, vmax, ls.artifact_tokens_flagged);
        caption(tile, "layer " + std::to_string(layers[i]) + fmt("  max %.1f", ls.norm_max));
        if (i % kPerRow == 0) tiles.emplace_back();
        tiles.back().push_back(tile);
    }
    const cv::Mat grid = labelled_grid(tiles, {}, {}, title + " (shared scale; outlined: norm > median + k*MAD)");
    return beside(grid, colour_bar(std::min(grid.rows, 320), 0.0f, vmax, Colormap::Viridis, "L2 norm"));
}

cv::Mat abstention_grid(const cv::Mat& image, const Trace& t, const std::vector<int>& layers, const std::string& title) {
    std::vector<std::string> columns;
    for (int h = 0; h < t.heads; ++h) columns.push_back("head " + std::to_string(h));
    std::vector<std::vector<cv::Mat>> tiles;
    for (int l : layers) {
        std::vector<cv::Mat> row;
        for (int h = 0; h < t.heads; ++h) {
            const auto grid = patch_grid(t.abstention_of(l, 0, h), t);
            row.push_back(overlay(image, grid.data(), t.grid_h, t.grid_w, 0.0f, 1.0f, Colormap::Magma));
        }
        tiles.push_back(std::move(row));
    }
    cv::Mat grid = labelled_grid(tiles, columns, layer_labels(layers), title + " (abstention mass of each query patch)");
    return beside(grid, colour_bar(std::min(grid.rows, 320), 0.0f, 1.0f, Colormap::Magma, "1 - sum p"));
}

}  // namespace vitreg::render
