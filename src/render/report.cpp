#include "vitreg/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace vitreg::render {

std::string base64(const std::string& bytes) {
    static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                           static_cast<unsigned char>(bytes[i + 2]);
        out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], kAlphabet[v & 63]};
    }
    if (i < bytes.size()) {
        unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
        out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=', '='};
    }
    return out;
}

std::string html_escape(const std::string& text) {
    std::string out;
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

namespace {

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, std::fabs(v) >= 100 ? "%.0f" : std::fabs(v) >= 1 ? "%.2f" : "%.3g", v);
    return buf;
}

// A line plot, x = layer index, with axes, ticks and a legend.
std::string svg_plot(const ReportPlot& p) {
    const int W = 460, H = 260, left = 52, right = 12, top = 28, bottom = 36;
    double lo = 0, hi = 0;
    std::size_t n = 0;
    for (const auto& s : p.series) {
        n = std::max(n, s.values.size());
        for (double v : s.values) hi = std::max(hi, v), lo = std::min(lo, v);
    }
    if (hi <= lo) hi = lo + 1;
    const double pw = W - left - right, ph = H - top - bottom;
    auto X = [&](std::size_t i) { return left + (n > 1 ? pw * static_cast<double>(i) / (n - 1) : pw / 2); };
    auto Y = [&](double v) { return top + ph * (1 - (v - lo) / (hi - lo)); };
    std::ostringstream o;
    o << "<svg class=\"plot\" viewBox=\"0 0 " << W << " " << H << "\" width=\"" << W << "\" height=\"" << H
      << "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">"
      << "<text x=\"" << left << "\" y=\"16\" class=\"t\">" << html_escape(p.title) << "</text>"
      << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph << "\" class=\"frame\"/>";
    for (int i = 0; i <= 4; ++i) {
        const double v = lo + (hi - lo) * i / 4;
        o << "<text x=\"" << left - 4 << "\" y=\"" << Y(v) + 4 << "\" class=\"ty\">" << number(v) << "</text>";
    }
    for (std::size_t i = 0; i < n; ++i)
        o << "<text x=\"" << X(i) << "\" y=\"" << top + ph + 14 << "\" class=\"tx\">" << i << "</text>";
    o << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 4 << "\" class=\"tx\">layer</text>";
    for (std::size_t k = 0; k < p.series.size(); ++k) {
        const auto& s = p.series[k];
        const char* colour = kPalette[k % (sizeof kPalette / sizeof *kPalette)];
        o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\" points=\"";
        for (std::size_t i = 0; i < s.values.size(); ++i) o << X(i) << "," << Y(s.values[i]) << " ";
        o << "\"/>";
        o << "<text x=\"" << left + 6 << "\" y=\"" << top + 14 + 13 * k << "\" fill=\"" << colour << "\" class=\"lg\">"
          << html_escape(s.label) << "</text>";
    }
    o << "</svg>";
    return o.str();
}

std::string figure(const ReportFigure& f) {
    return "<figure><img alt=\"" + html_escape(f.caption) + "\" src=\"data:image/png;base64," + base64(f.png) +
           "\"><figcaption>" + html_escape(f.caption) + "</figcaption></figure>\n";
}

const char* const kStyle = R"(
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1600px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
figure{display:inline-block;margin:8px 12px 8px 0;vertical-align:top}
figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:12px;color:#555}
table{border-collapse:collapse;font-size:12px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3;cursor:pointer;position:sticky;top:0}
td:first-child,td:nth-child(2){text-align:left}
.plot{margin:6px 12px 6px 0}.plot .frame{fill:none;stroke:#bbb}
.plot text{font-size:11px}.plot .t{font-size:13px}.plot .ty{text-anchor:end}.plot .tx{text-anchor:middle}
)";

// Sort the table by a column when its header is clicked (numbers numerically).
const char* const kScript = R"(
document.querySelectorAll('table.stats th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.dataset.dir !== 'asc';
    th.dataset.dir = asc ? 'asc' : 'desc';
    rows.sort(function (a, b) {
      var x = a.cells[col].textContent, y = b.cells[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
document.body.dataset.images = String(Array.prototype.filter.call(document.images, function (i) {
  return i.complete && i.naturalWidth > 0; }).length) + '/' + document.images.length;
)";

}  // namespace

std::string report_html(const Report& r) {
    std::ostringstream o;
    o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(r.title)
      << "</title><style>" << kStyle << "</style></head><body>\n<h1>" << html_escape(r.title) << "</h1>\n<p>"
      << html_escape(r.summary) << "</p>\n";
    for (const auto& f : r.figures) o << figure(f);
    if (!r.table_rows.empty()) {
        o << "<h2>Statistics (click a column to sort)</h2>\n<table class=\"stats\"><thead><tr>";
        for (const auto& h : r.table_header) o << "<th>" << html_escape(h) << "</th>";
        o << "</tr></thead><tbody>\n";
        for (const auto& row : r.table_rows) {
            o << "<tr>";
            for (const auto& c : row) o << "<td>" << html_escape(c) << "</td>";
            o << "</tr>\n";
        }
        o << "</tbody></table>\n";
    }
    if (!r.plots.empty()) {
        o << "<h2>Per layer</h2>\n";
        for (const auto& p : r.plots) o << svg_plot(p) << "\n";
    }
    if (!r.histograms.empty()) {
        o << "<h2>Output patch-norm histograms</h2>\n";
        for (const auto& f : r.histograms) o << figure(f);
    }
    o << "<script>" << kScript << "</script>\n</body></html>\n";
    return o.str();
}

}  // namespace vitreg::render
