#pragma once
// Pictures of what a Trace shows (OpenCV; not part of the core library): colour-mapped patch
// grids upsampled and overlaid on the image, outlines, colour bars, labelled grids and
// histograms. Every function returns a BGR 8-bit cv::Mat.
#include <opencv2/core.hpp>
#include <string>
#include <utility>
#include <vector>

#include "vitreg/preprocess.hpp"

namespace vitreg::render {

enum class Colormap { Viridis, Inferno, Magma };

// The model input as the model saw it, back in 8-bit BGR (undoing mean/std).
cv::Mat input_image(const Pixels& px, const std::array<float, 3>& mean, const std::array<float, 3>& std);

// grid [gh, gw] → colours, values clamped to [vmin, vmax].
cv::Mat colorize(const float* grid, int gh, int gw, float vmin, float vmax, Colormap map);
// The grid bilinearly upsampled to the image's size, colour-mapped and blended over it.
cv::Mat overlay(const cv::Mat& image, const float* grid, int gh, int gw, float vmin, float vmax, Colormap map,
                float alpha = 0.6f);
// Rectangles around patch cells (row, col) of a gh × gw grid drawn over `canvas`.
void outline_cells(cv::Mat& canvas, int gh, int gw, const std::vector<std::pair<int, int>>& cells,
                   const cv::Scalar& colour = cv::Scalar(255, 255, 255));
// A short label in the tile's top-left corner, white on a dark band.
void caption(cv::Mat& tile, const std::string& text);
// A vertical colour bar `height` px tall with tick values.
cv::Mat colour_bar(int height, float vmin, float vmax, Colormap map, const std::string& label = "");

// Tiles in rows × columns (each tile padded to the largest), with column headers on top,
// row labels on the left and a title; tiles keep their aspect ratio.
cv::Mat labelled_grid(const std::vector<std::vector<cv::Mat>>& tiles, const std::vector<std::string>& column_labels,
                      const std::vector<std::string>& row_labels, const std::string& title = "");
// Places `right` beside `left`, vertically centred, on a white background.
cv::Mat beside(const cv::Mat& left, const cv::Mat& right);

// Histogram of `values` with `bins` bins, log10(1 + count) bars, and labelled vertical
// markers (thresholds) where they fall inside the range.
struct Marker {
    float value;
    std::string label;
};
cv::Mat histogram(const std::vector<float>& values, int bins, const std::vector<Marker>& markers, const std::string& title,
                  const std::string& x_label);

// PNG encoding; the write is atomic (temporary name, then rename).
std::string png_bytes(const cv::Mat& image);
void write_png(const std::string& path, const cv::Mat& image);

}  // namespace vitreg::render
