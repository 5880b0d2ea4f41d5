#include "vitreg/render/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "text_format.hpp"

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

std::string printf_number(const char* format, int digits, double v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, format, digits, v);
    std::string s = buf;
    if (!s.empty() && s[0] == '-') s.replace(0, 1, "\u2212");  // a true minus sign
    return s;
}

// Cut a label to n bytes (not inside a UTF-8 sequence), marking the cut.
std::string truncate(const std::string& s, std::size_t n) {
    if (s.size() <= n) return s;
    std::size_t cut = n;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    return s.substr(0, cut) + "\u2026";
}

// An SVG label of at most n bytes, with the whole text as its tooltip when cut.
std::string svg_label(const std::string& s, std::size_t n) {
    return s.size() <= n ? html_escape(s) : "<title>" + html_escape(s) + "</title>" + html_escape(truncate(s, n));
}

// Round tick positions over [lo, hi]: steps of 1, 2, 2.5 or 5 × 10^k, about four of them.
std::vector<double> linear_ticks(double lo, double hi) {
    const double raw = (hi - lo) / 4, unit = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = unit * (raw / unit <= 1 ? 1 : raw / unit <= 2 ? 2 : raw / unit <= 2.5 ? 2.5 : raw / unit <= 5 ? 5 : 10);
    std::vector<double> ticks;
    for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
        ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
    return ticks;
}

// Labels for evenly spaced ticks, with the decimals their spacing needs (0.9985, 0.999, 0.9995
// rather than 0.999 three times).
std::vector<std::string> tick_labels(const std::vector<double>& ticks) {
    const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 0;
    int decimals = 0;
    if (step > 0) {
        const double e = std::floor(std::log10(step) + 1e-9), m = step / std::pow(10.0, e);
        decimals = std::clamp(static_cast<int>(-e) + (std::fabs(m - std::round(m)) > 1e-6 ? 1 : 0), 0, 8);
    }
    std::vector<std::string> out;
    for (double t : ticks) out.push_back(printf_number("%.*f", decimals, t));
    return out;
}

// Tick positions for a logarithmic axis over [lo, hi] (lo > 0): 1-2-5 steps, or decades when
// those are too many, or four geometric steps when the range holds fewer than two.
std::vector<double> log_ticks(double lo, double hi) {
    std::vector<double> ticks;
    for (const auto& steps : {std::vector<double>{1, 2, 5}, std::vector<double>{1}}) {
        ticks.clear();
        for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= static_cast<int>(std::ceil(std::log10(hi))); ++e)
            for (double m : steps) {
                const double t = m * std::pow(10.0, e);
                if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
            }
        if (ticks.size() <= 8) break;
    }
    if (ticks.size() < 2) {
        ticks.clear();
        for (int i = 0; i <= 3; ++i) ticks.push_back(lo * std::pow(hi / lo, i / 3.0));
    }
    return ticks;
}

// One axis: data range to pixels, linear or logarithmic.
struct Axis {
    double lo = 0, hi = 1;
    bool log = false;
    double at(double v, double from, double length) const {  // from + the fraction of length where v lies
        const double f = log ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : (v - lo) / (hi - lo);
        return from + length * std::clamp(f, -0.02, 1.02);
    }
    bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }
    void fit(double dlo, double dhi, bool include_zero) {
        lo = dlo, hi = dhi;
        if (!(lo <= hi)) lo = log ? 1 : 0, hi = log ? 10 : 1;  // no data
        if (!log && include_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
        if (hi <= lo) {  // one value: a range around it
            const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
            if (log) lo /= 2, hi *= 2;
            else lo -= lo == 0 ? 0 : d, hi += d;
        }
    }
    std::vector<double> ticks() const { return log ? log_ticks(lo, hi) : linear_ticks(lo, hi); }
};

std::string svg_open(const std::string& css_class, const std::string& id, int width, int height) {
    std::ostringstream o;
    o << "<svg class=\"" << html_escape(css_class) << "\"";
    if (!id.empty()) o << " id=\"" << html_escape(id) << "\"";
    o << " viewBox=\"0 0 " << width << " " << height << "\" width=\"" << width << "\" height=\"" << height
      << "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">";
    return o.str();
}

constexpr std::size_t kLabelChars = 36;  // longer labels are cut (the whole one is the tooltip)
int label_width(const std::vector<std::string>& labels) {
    std::size_t chars = 0;
    for (const auto& l : labels) chars = std::max(chars, std::min(l.size(), kLabelChars + 1));
    return static_cast<int>(6.6 * static_cast<double>(chars));
}

}  // namespace

const char* palette_colour(std::size_t k) { return kPalette[k % (sizeof kPalette / sizeof *kPalette)]; }

std::string format_number(double v) {
    if (!std::isfinite(v)) return kDash;
    return printf_number(std::fabs(v) >= 1000 ? "%.*f" : "%.*g", std::fabs(v) >= 1000 ? 0 : 3, v);
}

std::string format_near_one(double v) {
    if (!std::isfinite(v) || v >= 1 || v < 0.99) return v == 1 ? "1" : format_number(v);
    const int decimals = std::min(6, static_cast<int>(std::floor(-std::log10(1 - v) + 1e-9)) + 1);
    std::string s = printf_number("%.*f", decimals, v);
    while (s.back() == '0') s.pop_back();
    return s;
}

std::string svg_line_plot(const ReportPlot& p, const std::string& css_class, const std::string& id) {
    std::vector<std::string> legend_labels;
    for (const auto& s : p.series)
        if (!s.label.empty()) legend_labels.push_back(s.label);
    const int legend_w = legend_labels.empty() ? 0 : 30 + label_width(legend_labels);
    const int W = p.width + legend_w, H = p.height, left = 64, right = 12, top = 28, bottom = 36;
    const double pw = p.width - left - right, ph = H - top - bottom;
    auto x_of = [](const ReportSeries& s, std::size_t i) { return s.x.empty() ? static_cast<double>(i) : s.x[i]; };
    Axis ax{0, 0, p.log_x}, ay{0, 0, p.log_y};
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    bool layer_axis = !p.log_x;
    for (const auto& s : p.series) {
        layer_axis = layer_axis && s.x.empty();
        for (std::size_t i = 0; i < s.values.size(); ++i) {
            const double x = x_of(s, i);
            if (!ax.usable(x)) continue;
            for (double y : {s.values[i], i < s.low.size() ? s.low[i] : NAN, i < s.high.size() ? s.high[i] : NAN})
                if (ay.usable(y)) ylo = std::min(ylo, y), yhi = std::max(yhi, y), xlo = std::min(xlo, x), xhi = std::max(xhi, x);
        }
    }
    std::size_t layers = 0;
    if (layer_axis) {  // every layer has its place, even one without data
        for (const auto& s : p.series) layers = std::max(layers, s.values.size());
        xlo = 0, xhi = layers > 1 ? layers - 1.0 : 0.0;
    }
    ax.fit(xlo, xhi, false);
    if (layer_axis && layers <= 1) ax.lo = -1, ax.hi = 1;
    ay.fit(ylo, yhi, true);
    if (std::isfinite(p.y_min)) ay.lo = p.y_min;
    if (std::isfinite(p.y_max)) ay.hi = p.y_max;
    auto X = [&](double v) { return ax.at(v, left, pw); };
    auto Y = [&](double v) { return ay.at(v, top + ph, -ph); };

    std::ostringstream o;
    o << svg_open(css_class, id, W, H) << "<text x=\"" << left << "\" y=\"16\" class=\"t\">" << html_escape(p.title) << "</text>"
      << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph << "\" class=\"frame\"/>";
    const std::vector<double> yt = ay.ticks();
    std::vector<std::string> yl;
    for (double v : yt) yl.push_back(format_number(v));
    if (!ay.log) yl = tick_labels(yt);
    for (std::size_t i = 0; i < yt.size(); ++i)
        o << "<text x=\"" << left - 4 << "\" y=\"" << Y(yt[i]) + 4 << "\" class=\"ty\">" << yl[i] << "</text>";
    std::vector<double> xt;
    if (layer_axis) {
        const std::size_t step = std::max<std::size_t>(1, (layers + 15) / 16);
        for (std::size_t i = 0; i < layers; i += step) xt.push_back(static_cast<double>(i));
    } else {
        xt = ax.ticks();
    }
    std::vector<std::string> xl;
    for (double v : xt) xl.push_back(format_number(v));  // layers: whole; a log axis: 1-2-5 steps
    if (!ax.log && !layer_axis) xl = tick_labels(xt);
    for (std::size_t i = 0; i < xt.size(); ++i)
        o << "<text x=\"" << X(xt[i]) << "\" y=\"" << top + ph + 14 << "\" class=\"tx\">" << xl[i] << "</text>";
    o << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 4 << "\" class=\"tx\">" << html_escape(p.x_label) << "</text>";
    if (!p.y_label.empty())
        o << "<text transform=\"translate(12," << top + ph / 2 << ") rotate(-90)\" class=\"tx\">" << html_escape(p.y_label) << "</text>";
    std::size_t legend = 0;
    for (std::size_t k = 0; k < p.series.size(); ++k) {
        const auto& s = p.series[k];
        const std::string colour = s.colour.empty() ? palette_colour(k) : s.colour;
        const std::string dash = s.dashed ? " stroke-dasharray=\"5,3\"" : "";
        const std::size_t n = s.values.size();
        auto point_ok = [&](std::size_t i) { return ax.usable(x_of(s, i)) && ay.usable(s.values[i]); };
        auto band_ok = [&](std::size_t i) {
            return i < s.low.size() && i < s.high.size() && ax.usable(x_of(s, i)) && ay.usable(s.low[i]) && ay.usable(s.high[i]);
        };
        // The shaded band and the line, each over its runs of usable points.
        for (std::size_t i = 0; i < n;) {
            if (!band_ok(i)) { ++i; continue; }
            std::size_t j = i;
            while (j < n && band_ok(j)) ++j;
            o << "<polygon fill=\"" << colour << "\" fill-opacity=\"0.12\" stroke=\"none\" points=\"";
            for (std::size_t q = i; q < j; ++q) o << X(x_of(s, q)) << "," << Y(s.high[q]) << " ";
            for (std::size_t q = j; q-- > i;) o << X(x_of(s, q)) << "," << Y(s.low[q]) << " ";
            o << "\"/>";
            i = j;
        }
        for (std::size_t i = 0; i < n;) {
            if (!point_ok(i)) { ++i; continue; }
            std::size_t j = i;
            while (j < n && point_ok(j)) ++j;
            o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash << " points=\"";
            for (std::size_t q = i; q < j; ++q) o << X(x_of(s, q)) << "," << Y(s.values[q]) << " ";
            o << "\"/>";
            i = j;
        }
        if (s.markers)
            for (std::size_t i = 0; i < n; ++i)
                if (point_ok(i)) o << "<circle cx=\"" << X(x_of(s, i)) << "\" cy=\"" << Y(s.values[i]) << "\" r=\"3\" fill=\"" << colour << "\"/>";
        if (!s.label.empty()) {
            const double lx = p.width, ly = top + 8 + 15 * legend++;
            o << "<line x1=\"" << lx << "\" x2=\"" << lx + 18 << "\" y1=\"" << ly - 4 << "\" y2=\"" << ly - 4 << "\" stroke=\"" << colour
              << "\" stroke-width=\"2\"" << dash << "/><text x=\"" << lx + 24 << "\" y=\"" << ly << "\" class=\"lg\">"
              << svg_label(s.label, kLabelChars) << "</text>";
        }
    }
    o << "</svg>";
    return o.str();
}

std::string svg_bar_chart(const ReportBars& b, const std::string& css_class, const std::string& id) {
    const std::size_t ns = b.series.size(), nc = b.categories.size();
    const int bar = 12, group_gap = 10, legend = ns > 1 ? 18 : 0;
    const int left = 16 + label_width(b.categories), pw = 340, right = 56, top = 28 + legend, bottom = 34;
    double legend_w = left;
    for (std::size_t s = 0; s < ns && ns > 1; ++s) legend_w += 26 + 6.4 * static_cast<double>(b.series[s].size());
    const int W = std::max(left + pw + right, static_cast<int>(legend_w) + 8);
    const int H = top + static_cast<int>(nc * (ns * (bar + 2) + group_gap)) + bottom;
    auto colour_of = [&](std::size_t s) { return s < b.colours.size() && !b.colours[s].empty() ? b.colours[s] : std::string(palette_colour(s)); };
    auto value = [&](std::size_t s, std::size_t c) { return s < b.values.size() && c < b.values[s].size() ? b.values[s][c] : NAN; };
    double lo = INFINITY, hi = -INFINITY;
    for (std::size_t s = 0; s < ns; ++s)
        for (std::size_t c = 0; c < nc; ++c)
            if (std::isfinite(value(s, c))) lo = std::min(lo, value(s, c)), hi = std::max(hi, value(s, c));
    if (!(lo <= hi)) lo = 0, hi = b.near_one ? 1 : 0;
    if (b.near_one) {  // from 1 − (a round step above 1.2 × the largest distance from 1) to 1
        hi = std::max(hi, 1.0);
        const double gap = std::max(1.2 * (1 - lo), 1e-6), unit = std::pow(10.0, std::floor(std::log10(gap)));
        lo = std::max(-1.0, 1 - unit * (gap / unit <= 2 ? 2 : gap / unit <= 5 ? 5 : 10));
    } else {
        lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
        if (hi <= lo) hi = lo + 1;
    }
    const double base = std::clamp(0.0, lo, hi);
    auto X = [&](double v) { return left + pw * (std::clamp(v, lo, hi) - lo) / (hi - lo); };
    std::ostringstream o;
    o << svg_open(css_class, id, W, H) << "<text x=\"4\" y=\"16\" class=\"t\">" << html_escape(b.title) << "</text>";
    if (ns > 1) {
        double x = left;
        for (std::size_t s = 0; s < ns; ++s) {
            o << "<rect x=\"" << x << "\" y=\"24\" width=\"10\" height=\"10\" fill=\"" << colour_of(s) << "\"/><text x=\"" << x + 13
              << "\" y=\"33\" class=\"lg\">" << html_escape(b.series[s]) << "</text>";
            x += 26 + 6.4 * static_cast<double>(b.series[s].size());
        }
    }
    const int plot_h = H - top - bottom;
    const std::vector<double> ticks = linear_ticks(lo, hi);
    const std::vector<std::string> tick_text = tick_labels(ticks);
    for (std::size_t i = 0; i < ticks.size(); ++i)
        o << "<line x1=\"" << X(ticks[i]) << "\" x2=\"" << X(ticks[i]) << "\" y1=\"" << top << "\" y2=\"" << top + plot_h
          << "\" stroke=\"#e4e4e4\"/><text x=\"" << X(ticks[i]) << "\" y=\"" << top + plot_h + 14 << "\" class=\"tx\">" << tick_text[i] << "</text>";
    o << "<line x1=\"" << X(base) << "\" x2=\"" << X(base) << "\" y1=\"" << top << "\" y2=\"" << top + plot_h << "\" stroke=\"#888\"/>"
      << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 4 << "\" class=\"tx\">" << html_escape(b.value_label) << "</text>";
    double y = top + group_gap / 2.0;
    for (std::size_t c = 0; c < nc; ++c) {
        const double group_h = ns * (bar + 2);
        o << "<text x=\"" << left - 6 << "\" y=\"" << y + group_h / 2 + 3 << "\" class=\"ty\">" << svg_label(b.categories[c], kLabelChars)
          << "</text>";
        for (std::size_t s = 0; s < ns; ++s) {
            const double v = value(s, c), yb = y + s * (bar + 2);
            if (!std::isfinite(v)) {
                o << "<text x=\"" << X(base) + 3 << "\" y=\"" << yb + bar - 2 << "\" class=\"na\">" << kDash << "</text>";
                continue;
            }
            const double x0 = std::min(X(base), X(v)), x1 = std::max(X(base), X(v));
            const std::string shown = b.near_one ? format_near_one(v) : format_number(v);
            o << "<rect x=\"" << x0 << "\" y=\"" << yb << "\" width=\"" << std::max(x1 - x0, 0.5) << "\" height=\"" << bar << "\" fill=\""
              << colour_of(s) << "\"><title>" << html_escape(b.series[s]) << ": " << shown << "</title></rect>";
            o << "<text x=\"" << x1 + 3 << "\" y=\"" << yb + bar - 2 << "\" class=\"val\">" << shown << "</text>";  // right of the bar or the base
        }
        y += group_h + group_gap;
    }
    o << "</svg>";
    return o.str();
}

namespace {

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
.best{background:#fff3c4}.note{font-size:12px;color:#555;max-width:1100px}
.plot text{font-size:11px}.plot .t{font-size:13px}.plot .ty{text-anchor:end}.plot .tx{text-anchor:middle}
.plot .val{font-size:10px;fill:#333}.plot .na{fill:#999}
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

const char* report_style() { return kStyle; }

std::string report_html(const Report& r) {
    std::ostringstream o;
    o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(r.title)
      << "</title><style>" << kStyle << "</style></head><body>\n<h1>" << html_escape(r.title) << "</h1>\n<p>"
      << html_escape(r.summary) << "</p>\n";
    if (!r.summary_configs.empty()) {
        o << "<h2>Per configuration: mean \u00b1 sd over images</h2>\n<table class=\"summary\"><thead><tr><th>config</th>";
        for (const auto& c : r.summary_columns) {
            std::string name = html_escape(c.column);  // breakable after each underscore
            for (std::size_t at = name.find('_'); at != std::string::npos; at = name.find('_', at + 6)) name.insert(at + 1, "<wbr>");
            o << "<th>" << name << (c.lower_is_better ? " \u2193" : "") << "</th>";
        }
        o << "</tr></thead><tbody>\n";
        for (std::size_t k = 0; k < r.summary_configs.size(); ++k) {
            o << "<tr><td>" << html_escape(r.summary_configs[k]) << "</td>";
            for (const auto& c : r.summary_columns) {
                const std::string sd = "<br><small>\u00b1\u00a0" + format_number(c.sd[k]) + "</small>";
                if (k < c.best.size() && c.best[k]) o << "<td class=\"best\"><b>\u2605\u00a0" << format_number(c.mean[k]) << "</b>" << sd << "</td>";
                else o << "<td>" << format_number(c.mean[k]) << sd << "</td>";
            }
            o << "</tr>\n";
        }
        o << "</tbody></table>\n";
        if (!r.summary_note.empty()) o << "<p class=\"note\">" << html_escape(r.summary_note) << "</p>\n";
    }
    if (r.figures_heading.empty())
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
        o << "<h2>" << html_escape(r.plots_heading) << "</h2>\n";
        for (const auto& p : r.plots) o << svg_line_plot(p) << "\n";
    }
    if (!r.figures_heading.empty() && !r.figures.empty()) {
        o << "<h2>" << html_escape(r.figures_heading) << "</h2>\n";
        for (const auto& f : r.figures) o << figure(f);
    }
    if (!r.histograms.empty()) {
        o << "<h2>Output patch-norm histograms</h2>\n";
        for (const auto& f : r.histograms) o << figure(f);
    }
    if (!r.protocol.empty()) o << "<h2>Protocol</h2>\n<pre>" << html_escape(r.protocol) << "</pre>\n";
    o << "<script>" << kScript << "</script>\n</body></html>\n";
    return o.str();
}

}  // namespace vitreg::render
