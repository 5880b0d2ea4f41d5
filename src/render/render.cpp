#include "vitreg/render/render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "vitreg/error.hpp"
#include "vitreg/render/label_text.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::render {

namespace {

const cv::Scalar kWhite(255, 255, 255), kInk(40, 40, 40), kGrey(160, 160, 160);
constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;

int cv_map(Colormap m) {
    switch (m) {
        case Colormap::Viridis: return cv::COLORMAP_VIRIDIS;
        case Colormap::Inferno: return cv::COLORMAP_INFERNO;
        case Colormap::Magma: return cv::COLORMAP_MAGMA;
    }
    return cv::COLORMAP_VIRIDIS;
}

cv::Mat to_u8(const cv::Mat& values, float vmin, float vmax) {
    cv::Mat out;
    const double span = vmax > vmin ? vmax - vmin : 1.0;
    values.convertTo(out, CV_8U, 255.0 / span, -vmin * 255.0 / span);  // saturates outside [vmin, vmax]
    return out;
}

std::string format_value(float v) {
    char buf[32];
    if (std::fabs(v) >= 100 || v == 0) std::snprintf(buf, sizeof buf, "%.0f", v);
    else if (std::fabs(v) >= 1) std::snprintf(buf, sizeof buf, "%.2f", v);
    else std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
}

// Every label is drawn and measured as the font can draw it (label_text.hpp).
void put_text(cv::Mat& m, const std::string& text, cv::Point at, double scale = 0.45, const cv::Scalar& c = kInk) {
    cv::putText(m, drawable_label(text), at, kFont, scale, c, 1, cv::LINE_AA);
}

cv::Size text_size(const std::string& text, double scale) { return cv::getTextSize(drawable_label(text), kFont, scale, 1, nullptr); }

}  // namespace

cv::Mat input_image(const Pixels& px, const std::array<float, 3>& mean, const std::array<float, 3>& std) {
    cv::Mat out(px.height, px.width, CV_8UC3);
    const std::size_t plane = static_cast<std::size_t>(px.width) * px.height;
    for (int y = 0; y < px.height; ++y)
        for (int x = 0; x < px.width; ++x)
            for (int c = 0; c < 3; ++c) {
                const float v = (px.chw[c * plane + static_cast<std::size_t>(y) * px.width + x] * std[c] + mean[c]) * 255.0f;
                out.at<cv::Vec3b>(y, x)[2 - c] = cv::saturate_cast<uchar>(v);  // RGB → BGR
            }
    return out;
}

cv::Mat colorize(const float* grid, int gh, int gw, float vmin, float vmax, Colormap map) {
    const cv::Mat values(gh, gw, CV_32F, const_cast<float*>(grid));
    cv::Mat out;
    cv::applyColorMap(to_u8(values, vmin, vmax), out, cv_map(map));
    return out;
}

cv::Mat overlay(const cv::Mat& image, const float* grid, int gh, int gw, float vmin, float vmax, Colormap map, float alpha) {
    const cv::Mat values(gh, gw, CV_32F, const_cast<float*>(grid));
    cv::Mat up, heat, out;
    cv::resize(values, up, image.size(), 0, 0, cv::INTER_LINEAR);
    cv::applyColorMap(to_u8(up, vmin, vmax), heat, cv_map(map));
    cv::addWeighted(heat, alpha, image, 1.0 - alpha, 0.0, out);
    return out;
}

void outline_cells(cv::Mat& canvas, int gh, int gw, const std::vector<std::pair<int, int>>& cells, const cv::Scalar& colour) {
    const double ch = static_cast<double>(canvas.rows) / gh, cw = static_cast<double>(canvas.cols) / gw;
    for (const auto& [r, c] : cells) {
        const cv::Point a(static_cast<int>(c * cw), static_cast<int>(r * ch));
        const cv::Point b(static_cast<int>((c + 1) * cw) - 1, static_cast<int>((r + 1) * ch) - 1);
        cv::rectangle(canvas, a, b, cv::Scalar(0, 0, 0), 3);
        cv::rectangle(canvas, a, b, colour, 1);
    }
}

void caption(cv::Mat& tile, const std::string& text) {
    const cv::Size size = text_size(text, 0.4);
    cv::Mat band = tile(cv::Rect(0, 0, std::min(tile.cols, size.width + 8), std::min(tile.rows, size.height + 8)));
    band *= 0.35;
    put_text(tile, text, cv::Point(4, size.height + 3), 0.4, kWhite);
}

cv::Mat colour_bar(int height, float vmin, float vmax, Colormap map, const std::string& label) {
    const int bar_w = 14, width = 70, top = 26, bottom = 8, h = std::max(40, height - top - bottom);
    cv::Mat ramp(h, 1, CV_32F);
    for (int y = 0; y < h; ++y) ramp.at<float>(y) = vmax - (vmax - vmin) * y / std::max(1, h - 1);
    cv::Mat col;
    cv::applyColorMap(to_u8(ramp, vmin, vmax), col, cv_map(map));
    cv::resize(col, col, cv::Size(bar_w, h), 0, 0, cv::INTER_NEAREST);
    cv::Mat out(height, width, CV_8UC3, kWhite);
    col.copyTo(out(cv::Rect(6, top, bar_w, h)));
    for (int i = 0; i <= 4; ++i) {
        const int y = top + (h - 1) * i / 4;
        cv::line(out, cv::Point(6 + bar_w, y), cv::Point(10 + bar_w, y), kInk);
        put_text(out, format_value(vmax - (vmax - vmin) * i / 4.0f), cv::Point(13 + bar_w, y + 4), 0.35);
    }
    if (!label.empty()) put_text(out, label, cv::Point(2, 12), 0.35);
    return out;
}

namespace {

// Splits `text` at '\n' and wherever a line would be wider than `width` px.
std::vector<std::string> wrap(const std::string& text, int width, double scale) {
    std::vector<std::string> lines;
    std::string line;
    auto fits = [&](const std::string& s) { return text_size(s, scale).width <= width; };
    for (char c : drawable_label(text)) {
        if (c == '\n') {
            lines.push_back(line);
            line.clear();
            continue;
        }
        if (!line.empty() && !fits(line + c)) {
            lines.push_back(line);
            line.clear();
        }
        line += c;
    }
    if (!line.empty()) lines.push_back(line);
    return lines;
}

}  // namespace

cv::Mat labelled_grid(const std::vector<std::vector<cv::Mat>>& tiles, const std::vector<std::string>& column_labels,
                      const std::vector<std::string>& row_labels, const std::string& title) {
    int tw = 1, th = 1;
    std::size_t cols = column_labels.size();
    for (const auto& row : tiles) {
        cols = std::max(cols, row.size());
        for (const auto& t : row) {
            tw = std::max(tw, t.cols);
            th = std::max(th, t.rows);
        }
    }
    int label_w = 0;
    for (const auto& l : row_labels) label_w = std::max(label_w, text_size(l, 0.45).width + 12);
    constexpr double kScale = 0.45;
    constexpr int kLine = 17;
    std::vector<std::vector<std::string>> headers;
    std::size_t header_lines = 0;
    for (const auto& l : column_labels) {
        headers.push_back(wrap(l, tw, kScale));
        header_lines = std::max(header_lines, headers.back().size());
    }
    const int pad = 6, head = static_cast<int>(header_lines) * kLine + 6, title_h = title.empty() ? 0 : 28;
    const int width = std::max(label_w + static_cast<int>(cols) * (tw + pad) + pad,
                               text_size(title, 0.6).width + 2 * pad);
    const int height = title_h + head + static_cast<int>(tiles.size()) * (th + pad) + pad;
    cv::Mat out(height, width, CV_8UC3, kWhite);
    if (!title.empty()) put_text(out, title, cv::Point(pad, 20), 0.6);
    for (std::size_t c = 0; c < headers.size(); ++c)
        for (std::size_t i = 0; i < headers[c].size(); ++i)
            put_text(out, headers[c][i], cv::Point(label_w + pad + static_cast<int>(c) * (tw + pad), title_h + 14 + kLine * static_cast<int>(i)),
                     kScale);
    for (std::size_t r = 0; r < tiles.size(); ++r) {
        const int y = title_h + head + static_cast<int>(r) * (th + pad);
        if (r < row_labels.size()) put_text(out, row_labels[r], cv::Point(4, y + th / 2));
        for (std::size_t c = 0; c < tiles[r].size(); ++c) {
            const cv::Mat& t = tiles[r][c];
            if (t.empty()) continue;
            const int x = label_w + pad + static_cast<int>(c) * (tw + pad);
            t.copyTo(out(cv::Rect(x + (tw - t.cols) / 2, y + (th - t.rows) / 2, t.cols, t.rows)));
        }
    }
    return out;
}

cv::Mat beside(const cv::Mat& left, const cv::Mat& right) {
    cv::Mat out(std::max(left.rows, right.rows), left.cols + right.cols, CV_8UC3, kWhite);
    left.copyTo(out(cv::Rect(0, (out.rows - left.rows) / 2, left.cols, left.rows)));
    right.copyTo(out(cv::Rect(left.cols, (out.rows - right.rows) / 2, right.cols, right.rows)));
    return out;
}

cv::Mat histogram(const std::vector<float>& values, int bins, const std::vector<Marker>& markers, const std::string& title,
                  const std::string& x_label) {
    const int W = 520, H = 300, left = 50, right = 16, top = 34, bottom = 40;
    cv::Mat out(H, W, CV_8UC3, kWhite);
    put_text(out, title, cv::Point(left, 20), 0.5);
    if (values.empty()) return out;
    float lo = *std::min_element(values.begin(), values.end()), hi = *std::max_element(values.begin(), values.end());
    for (const auto& m : markers)
        if (m.value > hi && m.value < hi * 1.5f) hi = m.value;  // show a threshold just past the data
    lo = std::min(lo, 0.0f);
    if (hi <= lo) hi = lo + 1;
    std::vector<int> count(bins, 0);
    for (float v : values) count[std::clamp(static_cast<int>((v - lo) / (hi - lo) * bins), 0, bins - 1)]++;
    const double top_log = std::log10(1.0 + *std::max_element(count.begin(), count.end()));
    const int pw = W - left - right, ph = H - top - bottom;
    cv::rectangle(out, cv::Point(left, top), cv::Point(left + pw, top + ph), kGrey);
    for (int b = 0; b < bins; ++b) {
        if (!count[b]) continue;
        const int bh = static_cast<int>(ph * std::log10(1.0 + count[b]) / top_log);
        cv::rectangle(out, cv::Point(left + pw * b / bins + 1, top + ph - bh), cv::Point(left + pw * (b + 1) / bins - 1, top + ph),
                      cv::Scalar(140, 90, 60), cv::FILLED);
    }
    for (int i = 0; i <= 4; ++i) {
        const int x = left + pw * i / 4;
        put_text(out, format_value(lo + (hi - lo) * i / 4.0f), cv::Point(x - 12, top + ph + 16), 0.35);
    }
    put_text(out, x_label + "   (bar height: log10(1 + count))", cv::Point(left, H - 6), 0.38);
    put_text(out, std::to_string(*std::max_element(count.begin(), count.end())), cv::Point(4, top + 10), 0.35);
    const cv::Scalar colours[] = {cv::Scalar(40, 40, 220), cv::Scalar(30, 140, 30)};
    int shown = 0;
    for (const auto& m : markers) {
        if (m.value < lo || m.value > hi) continue;
        const cv::Scalar& c = colours[shown % 2];
        const int x = left + static_cast<int>(pw * (m.value - lo) / (hi - lo));
        cv::line(out, cv::Point(x, top), cv::Point(x, top + ph), c, 2);
        put_text(out, m.label + " " + format_value(m.value), cv::Point(std::max(left + 2, std::min(x + 4, W - 150)), top + 14 + 14 * shown),
                 0.38, c);
        ++shown;
    }
    return out;
}

std::string png_bytes(const cv::Mat& image) {
    std::vector<uchar> buf;
    if (!cv::imencode(".png", image, buf)) throw IoError("cannot encode PNG");
    return std::string(buf.begin(), buf.end());
}

void write_png(const std::string& path, const cv::Mat& image) { write_file_atomic(path, png_bytes(image)); }

}  // namespace vitreg::render
