#pragma once
// A self-contained HTML report: pictures embedded as data URIs, plots as inline SVG, one
// small script to sort the table. Opens in any browser from a file, no server.
#include <cmath>
#include <string>
#include <vector>

#include "vitreg/analysis/column_summary.hpp"

namespace vitreg::render {

struct ReportSeries {
    std::string label;           // shown in the plot's legend; empty: not listed
    std::vector<double> values;  // y, one per x; a non-finite value leaves a gap
    std::vector<double> low{}, high{};  // optional band around the line (same length as values), shaded
    std::vector<double> x{};        // optional x positions; empty: 0, 1, 2, … (the layer index)
    bool markers = false;           // a dot at each point
    bool dashed = false;
    std::string colour{};           // empty: the palette colour of the series' position
};

struct ReportPlot {
    std::string title, y_label;
    std::vector<ReportSeries> series;
    std::string x_label = "layer";
    bool log_x = false, log_y = false;      // logarithmic axes (non-positive values are left out)
    double y_min = NAN, y_max = NAN;        // fixed y range; NaN: from the data (linear: including 0)
    int width = 460, height = 260;
};

// Horizontal grouped bars: one group per category (a configuration, a key), one bar per series.
struct ReportBars {
    std::string title, value_label;
    std::vector<std::string> categories, series;
    std::vector<std::string> colours{};          // one per series; empty: the palette's
    std::vector<std::vector<double>> values{};   // [series][category]; non-finite or absent: missing, shown as a dash
    bool near_one = false;  // values near 1 (cosines): the axis may start above 0, labels show how far from 1
};

struct ReportFigure {
    std::string caption;
    std::string png;  // PNG bytes
};

// One statistic over images, per configuration (the best shown bold with a star).
using ColumnSummary = vitreg::ColumnSummary;

struct Report {
    std::string title;
    std::string summary;  // plain text, shown under the title
    std::vector<ReportFigure> figures;
    std::string figures_heading;  // empty: the figures right under the summary; else after the table and plots, under it
    std::vector<std::string> table_header;
    std::vector<std::vector<std::string>> table_rows;
    std::vector<ReportPlot> plots;
    std::string plots_heading = "Per layer";
    std::string protocol;  // what was measured how (data, split, seed, parameters), shown as is at the end; empty: none
    std::vector<ReportFigure> histograms;
    // Optional per-configuration summary, shown first: one row per configuration.
    std::vector<std::string> summary_configs;
    std::vector<ColumnSummary> summary_columns;
    std::string summary_note;  // plain text under the summary table
};

std::string report_html(const Report& report);
std::string base64(const std::string& bytes);
std::string html_escape(const std::string& text);

// The pieces report_html is made of, for other pages in the same style.
const char* report_style();                             // the style sheet (CSS, no <style> tag)
const char* palette_colour(std::size_t k);              // the k-th series colour, cycling
std::string format_number(double v);     // 3 significant digits (whole from 1000), a true minus sign, "—" when not finite
std::string format_near_one(double v);   // as format_number, with enough decimals in [0.99, 1) to show the distance from 1
// A line plot (x = layer index unless the series give x) with axes, ticks, axis labels and a
// legend right of it, as <svg class="CSS_CLASS" id="ID">.
std::string svg_line_plot(const ReportPlot& plot, const std::string& css_class = "plot", const std::string& id = "");
std::string svg_bar_chart(const ReportBars& bars, const std::string& css_class = "plot", const std::string& id = "");

}  // namespace vitreg::render
