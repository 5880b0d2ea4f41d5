#pragma once
// The pictures and the page of `vitreg eval`: a pair's matches drawn between its two views, and
// the evaluation's report.html (report_html's style: protocol, table, plot, figures).
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "vitreg/analysis/evaluation.hpp"
#include "vitreg/render/report.hpp"

namespace vitreg::render {

// The two views side by side at `height` pixels, each match a line: green where it lies within
// alpha·max(H, W) of the truth, red where not, grey where the truth is unknown; at most
// `max_lines` lines (evenly spaced over the matches), so the picture stays legible.
cv::Mat matches_picture(const std::string& first, const std::string& second, const CorrespondenceScore& score, double alpha,
                        int height = 300, std::size_t max_lines = 400);

// report.html: the table (one row per configuration), the protocol as JSON, the figures given and,
// for correspondence, PCK against alpha per configuration.
std::string eval_report_html(const EvalTable& table, const std::vector<ReportFigure>& figures);

}  // namespace vitreg::render
