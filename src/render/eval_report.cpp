#include "vitreg/render/eval_report.hpp"

#include <algorithm>
#include <opencv2/imgproc.hpp>

#include "vitreg/image.hpp"
#include "vitreg/render/render.hpp"

namespace vitreg::render {

namespace {

cv::Mat bgr_of(const std::string& path) {
    const Image im = decode_image(path);
    cv::Mat rgb(im.height, im.width, CV_8UC3, const_cast<std::uint8_t*>(im.rgb.data())), bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    return bgr;
}

}  // namespace

cv::Mat matches_picture(const std::string& first, const std::string& second, const CorrespondenceScore& score, double alpha,
                        int height, std::size_t max_lines) {
    const cv::Mat a = bgr_of(first), b = bgr_of(second);
    const double sa = static_cast<double>(height) / a.rows, sb = static_cast<double>(height) / b.rows;
    cv::Mat ra, rb;
    cv::resize(a, ra, cv::Size(std::max(1, static_cast<int>(a.cols * sa + 0.5)), height), 0, 0, cv::INTER_AREA);
    cv::resize(b, rb, cv::Size(std::max(1, static_cast<int>(b.cols * sb + 0.5)), height), 0, 0, cv::INTER_AREA);
    const int gap = 8;
    cv::Mat canvas(height, ra.cols + gap + rb.cols, CV_8UC3, cv::Scalar(255, 255, 255));
    ra.copyTo(canvas(cv::Rect(0, 0, ra.cols, height)));
    rb.copyTo(canvas(cv::Rect(ra.cols + gap, 0, rb.cols, height)));
    const std::size_t n = score.list.size(), step = std::max<std::size_t>(1, (n + max_lines - 1) / std::max<std::size_t>(1, max_lines));
    for (std::size_t i = 0; i < n; i += step) {
        const CorrespondenceMatch& m = score.list[i];
        const cv::Scalar colour = m.error < 0 ? cv::Scalar(160, 160, 160)
                                  : m.error <= alpha * score.threshold_side ? cv::Scalar(60, 180, 60)
                                                                            : cv::Scalar(40, 40, 220);
        const cv::Point p1(static_cast<int>((m.x1 + 0.5) * sa), static_cast<int>((m.y1 + 0.5) * sa));
        const cv::Point p2(ra.cols + gap + static_cast<int>((m.x2 + 0.5) * sb), static_cast<int>((m.y2 + 0.5) * sb));
        cv::line(canvas, p1, p2, colour, 1, cv::LINE_AA);
        cv::circle(canvas, p1, 2, colour, cv::FILLED, cv::LINE_AA);
        cv::circle(canvas, p2, 2, colour, cv::FILLED, cv::LINE_AA);
    }
    return canvas;
}

std::string eval_report_html(const EvalTable& t, const std::vector<ReportFigure>& figures) {
    Report r;
    r.title = "vitreg eval " + t.task + ": " + std::to_string(t.configs.size()) + " configurations";
    r.summary = t.task == "correspondence"
                    ? "Mutual nearest neighbours by cosine between the patch features of two views with known geometry; PCK@alpha is "
                      "the share of the scored matches within alpha * max(H, W) of where the truth puts them."
                : t.task == "segmentation"
                    ? "mIoU per patch of a dense k-NN (Hummingbird: a memory of training patches, cosine, similarity-weighted votes) "
                      "and of a linear probe, both on the final-normed patch features; the labels are each patch's majority label."
                    : "Leave-one-out k-NN accuracy on image features (cosine, similarity-weighted votes).";
    r.protocol = t.protocol.dump(1);
    r.table_header = {"config"};
    r.table_header.insert(r.table_header.end(), t.columns.begin(), t.columns.end());
    for (std::size_t k = 0; k < t.configs.size(); ++k) {
        std::vector<std::string> row = {t.configs[k]};
        for (double v : t.values[k]) row.push_back(format_number(v));
        r.table_rows.push_back(row);
    }
    r.figures = figures;
    r.figures_heading = "Matches";
    if (t.task == "correspondence") {
        const std::vector<double> alphas = t.protocol["parameters"]["alphas"].get<std::vector<double>>();
        ReportPlot plot{"PCK against alpha (mean over the pairs)", "PCK", {}};
        plot.x_label = "alpha";
        plot.y_min = 0;
        plot.y_max = 1;
        for (std::size_t k = 0; k < t.configs.size(); ++k)
            plot.series.push_back({t.configs[k], std::vector<double>(t.values[k].begin(), t.values[k].begin() + alphas.size()), {}, {}, alphas, true});
        r.plots.push_back(plot);
        r.plots_heading = "PCK";
    }
    return report_html(r);
}

}  // namespace vitreg::render
