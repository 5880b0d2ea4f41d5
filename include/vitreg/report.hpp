#pragma once
// A self-contained HTML report: pictures embedded as data URIs, plots as inline SVG, one
// small script to sort the table. Opens in any browser from a file, no server.
#include <string>
#include <vector>

namespace vitreg::render {

struct ReportSeries {
    std::string label;
    std::vector<double> values;  // one per layer
};

struct ReportPlot {
    std::string title, y_label;
    std::vector<ReportSeries> series;
};

struct ReportFigure {
    std::string caption;
    std::string png;  // PNG bytes
};

struct Report {
    std::string title;
    std::string summary;  // plain text, shown under the title
    std::vector<ReportFigure> figures;
    std::vector<std::string> table_header;
    std::vector<std::vector<std::string>> table_rows;
    std::vector<ReportPlot> plots;
    std::vector<ReportFigure> histograms;
};

std::string report_html(const Report& report);
std::string base64(const std::string& bytes);
std::string html_escape(const std::string& text);

}  // namespace vitreg::render
