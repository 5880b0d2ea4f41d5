#include "vitreg/render/study_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>

#include "vitreg/render/report.hpp"
#include "text_format.hpp"

namespace vitreg::render {

namespace {

using nlohmann::json;


// Reading the study without trusting it: a missing key, a wrong type or an index past the end
// reads as null.
const json& at(const json& j, const char* key) {
    static const json null;
    if (!j.is_object()) return null;
    const auto it = j.find(key);
    return it == j.end() ? null : *it;
}
const json& nth(const json& j, std::size_t i) {
    static const json null;
    return j.is_array() && i < j.size() ? j[i] : null;
}
double num(const json& j) { return j.is_number() ? j.get<double>() : NAN; }
std::string text(const json& j) { return j.is_string() ? j.get<std::string>() : j.is_null() ? std::string() : j.dump(); }
std::size_t count(const json& j) { return j.is_array() ? j.size() : 0; }

std::string printf_number(const char* format, double v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, format, v);
    std::string s = buf;
    if (!s.empty() && s[0] == '-') s.replace(0, 1, "\u2212");
    return s;
}
std::string signed_number(double v) { return std::isfinite(v) && v > 0 ? "+" + format_number(v) : format_number(v); }
std::string percent(double v) { return std::isfinite(v) ? printf_number("%.0f", 100 * v) + "%" : kDash; }
std::string integer(double v) { return std::isfinite(v) ? printf_number("%.0f", v) : kDash; }

const char* const kFigureClass = "figure plot";

std::string svg_open(int width, int height, const std::string& id) {
    std::ostringstream o;
    o << "<svg class=\"" << kFigureClass << "\" id=\"" << html_escape(id) << "\" viewBox=\"0 0 " << width << " " << height << "\" width=\"" << width
      << "\" height=\"" << height << "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">";
    return o.str();
}

std::string svg_bars(const ReportBars& b, const std::string& id = "") { return svg_bar_chart(b, kFigureClass, id); }

// The head classes of figure 1, in stacking order, with their colours.
struct Segment {
    const char* label;
    const char* colour;
};
const Segment kSegments[] = {{"dump: cls", "#1f77b4"},   {"dump: register", "#2ca02c"}, {"dump: test-time register", "#17becf"},
                             {"dump: artifact", "#d62728"}, {"dump: patch", "#ff7f0e"}, {"abstain", "#9467bd"},
                             {"neither", "#c7c7c7"}};
constexpr std::size_t kSegmentCount = sizeof kSegments / sizeof *kSegments;

std::size_t segment_of(const json& head) {
    const std::string cls = text(at(head, "class")), kind = text(at(head, "key_kind"));
    if (cls == "abstain") return 5;
    if (cls != "dump") return 6;
    static const char* const kinds[] = {"cls", "register", "test_time_register", "artifact", "patch"};
    for (std::size_t i = 0; i < 5; ++i)
        if (kind == kinds[i]) return i;
    return 4;
}

// Figure 1 for one configuration: per layer the fractions of heads in each class, stacked.
std::string svg_head_classes(const json& config, const std::string& title, const std::string& id) {
    const json& heads = at(config, "heads");
    const std::size_t layers = count(heads);
    const int left = 46, top = 28, bottom = 34, legend_w = 170, pw = std::max<int>(220, static_cast<int>(layers) * 22), ph = 180;
    const int W = left + pw + 12 + legend_w, H = top + ph + bottom;
    std::ostringstream o;
    o << svg_open(W, H, id) << "<text x=\"4\" y=\"16\" class=\"t\">" << html_escape(title) << "</text>"
      << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph << "\" class=\"frame\"/>";
    for (int i = 0; i <= 4; ++i)
        o << "<text x=\"" << left - 4 << "\" y=\"" << top + ph * (1 - i / 4.0) + 4 << "\" class=\"ty\">" << format_number(i / 4.0) << "</text>";
    o << "<text transform=\"translate(12," << top + ph / 2 << ") rotate(-90)\" class=\"tx\">fraction of heads</text>"
      << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 4 << "\" class=\"tx\">layer</text>";
    const double slot = layers ? static_cast<double>(pw) / layers : pw;
    for (std::size_t l = 0; l < layers; ++l) {
        const json& row = nth(heads, l);
        const std::size_t n = count(row);
        std::size_t counts[kSegmentCount] = {};
        for (std::size_t h = 0; h < n; ++h) ++counts[segment_of(nth(row, h))];
        double y = top + ph;
        const double x = left + slot * l + slot * 0.12;
        for (std::size_t s = 0; s < kSegmentCount && n; ++s) {
            if (!counts[s]) continue;
            const double h = ph * static_cast<double>(counts[s]) / n;
            y -= h;
            o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << slot * 0.76 << "\" height=\"" << h << "\" fill=\"" << kSegments[s].colour
              << "\"><title>layer " << l << ", " << kSegments[s].label << ": " << counts[s] << " of " << n << " heads</title></rect>";
        }
        if (layers <= 16 || l % ((layers + 15) / 16) == 0)
            o << "<text x=\"" << left + slot * (l + 0.5) << "\" y=\"" << top + ph + 14 << "\" class=\"tx\">" << l << "</text>";
    }
    for (std::size_t s = 0; s < kSegmentCount; ++s) {
        const int ly = top + 4 + static_cast<int>(s) * 16;
        o << "<rect x=\"" << left + pw + 14 << "\" y=\"" << ly << "\" width=\"10\" height=\"10\" fill=\"" << kSegments[s].colour
          << "\"/><text x=\"" << left + pw + 28 << "\" y=\"" << ly + 9 << "\" class=\"lg\">" << kSegments[s].label << "</text>";
    }
    o << "</svg>";
    return o.str();
}

double mean_of(const json& row) {
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t i = 0; i < count(row); ++i)
        if (std::isfinite(num(nth(row, i)))) sum += num(nth(row, i)), ++n;
    return n ? sum / n : NAN;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// The configurations' names, as given.
std::vector<std::string> names_of(const json& configs) {
    std::vector<std::string> names;
    for (std::size_t k = 0; k < count(configs); ++k) {
        std::string name = text(at(nth(configs, k), "name"));
        names.push_back(name.empty() ? "config " + std::to_string(k + 1) : name);
    }
    return names;
}

// One figure section: its id, heading and caption, then the SVGs.
void section(std::ostringstream& o, const std::string& id, int number, const std::string& heading, const std::string& caption,
             const std::string& body) {
    o << "<section id=\"" << id << "\"><h2>" << number << " \u00b7 " << html_escape(heading) << "</h2>\n<p class=\"cap\">"
      << html_escape(caption) << "</p>\n"
      << body << "</section>\n";
}

// A cosine pulled from study.json by a path of keys.
double dig(const json& j, std::initializer_list<const char*> path) {
    const json* p = &j;
    for (const char* key : path) p = &at(*p, key);
    return num(*p);
}

// What the figures and the property table read: the study, its configurations and their names,
// and the per-configuration figure ids emitted (a cell links to its own configuration's figure
// where there is one).
struct Page {
    const json& study;
    const json& configs;
    std::size_t nk;
    std::vector<std::string> names;
    std::set<std::string> ids;
};

// A configuration's summary numbers by key (NaN where missing): what the table's cells print.
struct Summary {
    const json& s;
    double operator()(const char* key) const { return num(at(s, key)); }
};

// 1. Head classes: per configuration, stacked bars per layer.
std::string figure_heads(Page& page) {
    std::ostringstream b;
    for (std::size_t k = 0; k < page.nk; ++k) {
        const std::string id = "fig-heads-" + std::to_string(k);
        if (!count(at(nth(page.configs, k), "heads"))) continue;
        b << svg_head_classes(nth(page.configs, k), page.names[k], id) << "\n";
        page.ids.insert(id);
    }
    return b.str();
}

std::string cell_heads(const json&, const Summary& v) {
    std::string out = "dump " + percent(v("heads_dump")) + " \u00b7 abstain " + percent(v("heads_abstain")) + " \u00b7 neither " +
                      percent(v("heads_neither"));
    std::string on;
    const char* const keys[] = {"dump_cls", "dump_register", "dump_test_time_register", "dump_artifact", "dump_patch"};
    const char* const labels[] = {"cls", "register", "test-time register", "artifact", "patch"};
    for (int i = 0; i < 5; ++i)
        if (v(keys[i]) > 0) on += std::string(on.empty() ? "" : " \u00b7 ") + labels[i] + " " + percent(v(keys[i]));
    if (!on.empty()) out += "<br><small>dump on " + html_escape(on) + "</small>";
    return out;
}

// 2. Σp per layer.
std::string figure_weights_sum(Page& page) {
    ReportPlot p;
    p.title = "\u03a3p per layer: mean over heads, band min\u2013max";
    p.y_label = "\u03a3p";
    p.width = 560, p.height = 300;
    for (std::size_t k = 0; k < page.nk; ++k) {
        const json& c = nth(page.configs, k);
        ReportSeries s;
        s.label = page.names[k];
        for (std::size_t l = 0; l < count(at(c, "weights_sum")); ++l) {
            s.values.push_back(mean_of(nth(at(c, "weights_sum"), l)));
            const json& range = nth(at(c, "weights_sum_range"), l);
            s.low.push_back(num(nth(range, 0)));
            s.high.push_back(num(nth(range, 1)));
        }
        p.series.push_back(s);
    }
    return svg_line_plot(p, kFigureClass) + "\n";
}

std::string cell_weights_sum(const json&, const Summary& v) {
    return format_near_one(v("weights_sum_mean")) + " [" + format_number(v("weights_sum_min")) + ", " +
           format_number(v("weights_sum_max")) + "]";
}

// 3. Cost.
std::string figure_cost(Page& page) {
    ReportBars ms{"forward time per image", "ms per image", page.names, {"ms per image"}, {}, {{}}};
    ReportBars params{"parameters added", "parameters", page.names, {"parameters added"}, {"#2ca02c"}, {{}}};
    for (std::size_t k = 0; k < page.nk; ++k) {
        ms.values[0].push_back(dig(nth(page.configs, k), {"cost", "ms_per_image"}));
        params.values[0].push_back(dig(nth(page.configs, k), {"cost", "parameters_added"}));
    }
    return svg_bars(ms) + svg_bars(params) + "\n";
}

std::string cell_cost(const json&, const Summary& v) {
    const double p = v("parameters_added");
    return (std::isfinite(p) && p >= 0 ? "+" : "") + integer(p) + " params \u00b7 " + format_number(v("ms_per_image")) + " ms";
}

// 4. Massive activations: the ratio and kurtosis plots, and each configuration's worst layer.
std::string figure_massive(Page& page) {
    ReportPlot ratio, kurt;
    ratio.title = "massive activations: top-1 / median |x| per layer";
    ratio.y_label = "top / median (log)";
    ratio.log_y = true;
    kurt.title = "kurtosis of the residual stream per layer";
    kurt.y_label = "kurtosis (log)";
    kurt.log_y = true;
    std::ostringstream table;
    table << "<table class=\"small\"><thead><tr><th>config</th><th>worst layer</th><th>top/median</th><th>token kind</th>"
             "<th>median |x|</th><th>top 3 [value, token, channel, image]</th></tr></thead><tbody>\n";
    for (std::size_t k = 0; k < page.nk; ++k) {
        const json& massive = at(nth(page.configs, k), "massive");
        ReportSeries r{page.names[k], {}}, q{page.names[k], {}};
        std::size_t worst = 0;
        for (std::size_t l = 0; l < count(massive); ++l) {
            r.values.push_back(num(at(nth(massive, l), "ratio")));
            q.values.push_back(num(at(nth(massive, l), "kurtosis")));
            if (!(r.values[worst] >= r.values[l])) worst = l;
        }
        ratio.series.push_back(r);
        kurt.series.push_back(q);
        const json& w = nth(massive, worst);
        table << "<tr><td>" << html_escape(page.names[k]) << "</td>";
        if (count(massive) == 0) {
            table << "<td colspan=\"5\">" << kDash << "</td></tr>\n";
            continue;
        }
        table << "<td>" << worst << "</td><td>" << format_number(num(at(w, "ratio"))) << "\u00d7</td><td>"
              << html_escape(text(at(w, "top_kind"))) << "</td><td>" << format_number(num(at(w, "median"))) << "</td><td>";
        for (std::size_t t = 0; t < count(at(w, "top")); ++t) {
            const json& e = nth(at(w, "top"), t);
            table << (t ? " " : "") << "[" << format_number(num(nth(e, 0))) << ", " << integer(num(nth(e, 1))) << ", " << integer(num(nth(e, 2)))
                  << ", " << integer(num(nth(e, 3))) << "]";
        }
        table << "</td></tr>\n";
    }
    table << "</tbody></table>\n";
    return svg_line_plot(ratio, kFigureClass) + svg_line_plot(kurt, kFigureClass) + "\n" + table.str();
}

std::string cell_massive(const json&, const Summary& v) {
    if (!std::isfinite(v("massive_ratio"))) return kDash;
    return "top/median " + format_number(v("massive_ratio")) + "\u00d7 (layer " + integer(v("massive_layer")) + ", " +
           html_escape(text(at(v.s, "massive_kind"))) + ")";
}

// 5. INT8.
std::string figure_int8(Page& page) {
    const std::vector<std::string>& names = page.names;
    ReportBars cls{"int8: CLS cosine to fp32", "CLS cosine", names, {"per-token", "per-tensor"}, {}, {{}, {}}, true};
    ReportBars patch{"int8: patch cosine to fp32", "patch cosine", names, {"per-token", "per-tensor"}, {}, {{}, {}}, true};
    ReportBars acc{"accuracy", "accuracy", names, {"fp32", "int8 per-token", "int8 per-tensor"},
                   {"#7f7f7f", palette_colour(0), palette_colour(1)}, {{}, {}, {}}};
    bool any_accuracy = false;
    for (std::size_t k = 0; k < page.nk; ++k) {
        const json& q = at(nth(page.configs, k), "int8");
        int s = 0;
        for (const char* kind : {"per_token", "per_tensor"}) {
            cls.values[s].push_back(dig(q, {kind, "cls_cosine"}));
            patch.values[s].push_back(dig(q, {kind, "patch_cosine"}));
            acc.values[s + 1].push_back(dig(q, {kind, "accuracy"}));
            ++s;
        }
        acc.values[0].push_back(num(at(q, "fp32_accuracy")));
        for (const auto& v : acc.values) any_accuracy = any_accuracy || std::isfinite(v.back());
    }
    return svg_bars(cls) + svg_bars(patch) + (any_accuracy ? svg_bars(acc) : std::string()) + "\n";
}

std::string cell_int8(const json&, const Summary& v) {
    std::string out = "CLS " + format_near_one(v("int8_per_token_cls_cosine")) + " / " +
                      format_near_one(v("int8_per_tensor_cls_cosine")) + " <small>(per-token / per-tensor)</small>";
    if (std::isfinite(v("fp32_accuracy")))
        out += "<br><small>accuracy " + format_number(v("fp32_accuracy")) + " \u2192 " + format_number(v("int8_per_token_accuracy")) +
               " / " + format_number(v("int8_per_tensor_accuracy")) + "</small>";
    return out;
}

// 6. Eviction.
std::string figure_eviction(Page& page) {
    const std::vector<std::string> series = {"sink", "artifacts", "registers"};
    ReportBars cls{"eviction: CLS cosine to the configuration as given", "CLS cosine", page.names, series, {}, {{}, {}, {}}, true};
    ReportBars patch{"eviction: patch cosine", "patch cosine", page.names, series, {}, {{}, {}, {}}, true};
    for (std::size_t k = 0; k < page.nk; ++k) {
        const json& e = at(nth(page.configs, k), "eviction");
        int s = 0;
        for (const char* kind : {"sink", "artifacts", "registers"}) {
            cls.values[s].push_back(dig(e, {kind, "cls_cosine"}));
            patch.values[s++].push_back(dig(e, {kind, "patch_cosine"}));
        }
    }
    return svg_bars(cls) + svg_bars(patch) + "\n";
}

std::string cell_eviction(const json&, const Summary& v) {
    std::string out;
    for (const char* kind : {"sink", "artifacts", "registers"}) {
        const double x = v(("evict_" + std::string(kind) + "_cls_cosine").c_str());
        if (std::isfinite(x)) out += (out.empty() ? "" : " \u00b7 ") + std::string(kind) + " " + format_near_one(x);
    }
    return out.empty() ? kDash : out;
}

// 7. Retrofit.
std::string figure_retrofit(Page& page) {
    const std::vector<std::string> series = {"softmax-1", "calibrated sink", "calibrated sink, evicted"};
    const char* const keys[] = {"softmax1", "calibrated_sink", "calibrated_sink_evicted"};
    ReportBars cls{"retrofit: CLS cosine to softmax", "CLS cosine", {}, series, {}, {{}, {}, {}}, true};
    ReportBars patch{"retrofit: patch cosine to softmax", "patch cosine", {}, series, {}, {{}, {}, {}}, true};
    ReportBars change{"retrofit: accuracy change", "accuracy change (variant \u2212 original)", {}, series, {}, {{}, {}, {}}};
    bool any_accuracy = false;
    for (std::size_t k = 0; k < page.nk; ++k) {
        const json& r = at(nth(page.configs, k), "retrofit");
        if (!r.is_object()) continue;
        for (ReportBars* b : {&cls, &patch, &change}) b->categories.push_back(page.names[k]);
        for (int s = 0; s < 3; ++s) {
            cls.values[s].push_back(dig(r, {keys[s], "cls_cosine"}));
            patch.values[s].push_back(dig(r, {keys[s], "patch_cosine"}));
            change.values[s].push_back(dig(r, {keys[s], "accuracy_change"}));
            any_accuracy = any_accuracy || std::isfinite(change.values[s].back());
        }
    }
    return cls.categories.empty()
               ? "<p class=\"na\">No configuration is a softmax-trained checkpoint run with softmax: nothing to retrofit.</p>\n"
               : svg_bars(cls) + svg_bars(patch) + (any_accuracy ? svg_bars(change) : std::string()) + "\n";
}

std::string cell_retrofit(const json&, const Summary& v) {
    const double a = v("retrofit_softmax1_cls_cosine"), b = v("retrofit_calibrated_sink_cls_cosine"),
                 e = v("retrofit_calibrated_sink_evicted_cls_cosine");
    if (!std::isfinite(a) && !std::isfinite(b) && !std::isfinite(e)) return kDash;
    std::string out = "softmax-1 " + format_near_one(a) + " \u00b7 sink " + format_near_one(b) + " \u00b7 evicted " + format_near_one(e);
    const double da = v("retrofit_softmax1_accuracy_change"), db = v("retrofit_calibrated_sink_accuracy_change"),
                 de = v("retrofit_calibrated_sink_evicted_accuracy_change");
    if (std::isfinite(da) || std::isfinite(db) || std::isfinite(de))
        out += "<br><small>\u0394accuracy " + signed_number(da) + " / " + signed_number(db) + " / " + signed_number(de) + "</small>";
    return out;
}

// One panel of figure 8: head h of layer l, its measured mass per size (the configuration's
// colour k) and the fixed-logit curve σ(zl + log L) over [lmin, lmax] where zl is known.
std::string mass_panel(const json& sizes, double zl, std::size_t l, std::size_t h, std::size_t k, double lmin, double lmax) {
    ReportPlot p;
    p.title = "layer " + std::to_string(l) + " \u00b7 head " + std::to_string(h);
    p.x_label = "tokens L (log)";
    p.y_label = "mass m";
    p.log_x = true;
    p.width = 210, p.height = 150;
    ReportSeries measured;
    measured.markers = true;
    measured.colour = palette_colour(k);
    for (std::size_t i = 0; i < count(sizes); ++i) {
        measured.x.push_back(num(at(nth(sizes, i), "tokens")));
        measured.values.push_back(num(nth(nth(at(nth(sizes, i), "mass"), l), h)));
    }
    p.series.push_back(measured);
    if (std::isfinite(zl) && std::isfinite(lmin) && lmin > 0) {
        ReportSeries curve;
        curve.dashed = true;
        curve.colour = "#555";
        for (int i = 0; i <= 24; ++i) {
            const double L = lmin * std::pow(lmax / lmin, i / 24.0);
            curve.x.push_back(L);
            curve.values.push_back(sigmoid(zl + std::log(L)));
        }
        p.series.push_back(curve);
    }
    // The y axis spans this head's points and curve (masses near 1 would be flat on [0, 1]).
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& s : p.series)
        for (double m : s.values)
            if (std::isfinite(m)) lo = std::min(lo, m), hi = std::max(hi, m);
    if (lo <= hi) {
        const double pad = std::max(0.1 * (hi - lo), 5e-4);
        p.y_min = std::max(0.0, lo - pad), p.y_max = std::min(1.0, hi + pad);
        if (p.y_max <= p.y_min) p.y_min = p.y_max - 1e-3;
    }
    return svg_line_plot(p, kFigureClass);
}

// 8. Mass against the number of keys, per head, beside σ(z + log L), the mass of fixed logits
//    (vitreg's own derivation: docs/design.md, "The study's property table").
std::string figure_mass_tokens(Page& page) {
    std::ostringstream b;
    for (std::size_t k = 0; k < page.nk; ++k) {
        const json& c = nth(page.configs, k);
        const json& sizes = at(c, "mass_vs_tokens");
        const json& z = at(c, "mass_uniform_logit");
        if (!count(sizes)) continue;
        const json& first = at(nth(sizes, 0), "mass");
        const std::size_t layers = count(first);
        std::size_t heads = 0;
        bool all_one = true;
        for (std::size_t l = 0; l < layers; ++l) heads = std::max(heads, count(nth(first, l)));
        for (std::size_t i = 0; i < count(sizes); ++i)
            for (std::size_t l = 0; l < layers; ++l)
                for (std::size_t h = 0; h < heads; ++h) {
                    const double m = num(nth(nth(at(nth(sizes, i), "mass"), l), h));
                    all_one = all_one && (!std::isfinite(m) || std::fabs(m - 1) < 1e-6);
                }
        b << "<h3>" << html_escape(page.names[k]) << "</h3>\n";
        if (all_one) {
            b << "<p class=\"na\">Every head's mass is 1 at every size (softmax): no gate to drift.</p>\n";
            continue;
        }
        const std::string id = "fig-mass-" + std::to_string(k);
        page.ids.insert(id);
        b << "<div class=\"multiples\" id=\"" << id << "\" style=\"grid-template-columns:repeat(" << std::max<std::size_t>(heads, 1)
          << ",auto)\">";
        double lmin = INFINITY, lmax = -INFINITY;
        for (std::size_t i = 0; i < count(sizes); ++i) {
            const double L = num(at(nth(sizes, i), "tokens"));
            if (std::isfinite(L) && L > 0) lmin = std::min(lmin, L), lmax = std::max(lmax, L);
        }
        if (lmin == lmax) lmin /= 2, lmax *= 2;  // one size: the curve around its one point
        for (std::size_t l = 0; l < layers; ++l)
            for (std::size_t h = 0; h < heads; ++h) b << mass_panel(sizes, num(nth(nth(z, l), h)), l, h, k, lmin, lmax);
        b << "</div>\n";
    }
    return b.str();
}

std::string cell_mass_tokens(const json& c, const Summary& v) {
    if (!std::isfinite(v("mass_smallest"))) return kDash;
    if (count(at(c, "mass_vs_tokens")) <= 1) return "m " + format_near_one(v("mass_smallest")) + " <small>(one size)</small>";
    std::string out = "m " + format_near_one(v("mass_smallest")) + " \u2192 " + format_near_one(v("mass_largest"));
    if (std::isfinite(v("mass_drift"))) out += ", drift " + signed_number(v("mass_drift"));
    return out;
}

// 9. The abstaining query from a real head: the null slot of softmax-1 (Miller 2023,
//    docs/design.md, "References" [Miller2023]) or of a sink, beside softmax on the same keys.
std::string figure_abstaining(Page& page) {
    std::ostringstream b;
    const json& images = at(page.study, "images");
    for (std::size_t k = 0; k < page.nk; ++k) {
        const json& q = at(nth(page.configs, k), "abstaining_query");
        if (!q.is_object()) continue;
        ReportBars bars;
        bars.value_label = "attention weight";
        bars.series = {page.names[k], "same query with softmax"};
        bars.colours = {palette_colour(k), "#7f7f7f"};
        bars.values = {{}, {}};
        for (std::size_t i = 0; i < count(at(q, "keys")); ++i) {
            const json& key = nth(at(q, "keys"), i);
            bars.categories.push_back("token " + integer(num(at(key, "token"))) + " (" + text(at(key, "kind")) + ")");
            bars.values[0].push_back(num(at(key, "weight")));
            bars.values[1].push_back(num(at(key, "softmax_weight")));
        }
        bars.categories.push_back("null slot");
        bars.values[0].push_back(num(at(q, "abstention")));
        bars.values[1].push_back(0.0);
        bars.categories.push_back("rest");
        bars.values[0].push_back(num(at(q, "rest")));
        bars.values[1].push_back(num(at(q, "softmax_rest")));
        const double image = num(at(q, "image"));
        std::string image_name = image >= 0 && image < 1e9 ? text(nth(images, static_cast<std::size_t>(image))) : "";
        image_name = image_name.substr(image_name.find_last_of('/') + 1);
        bars.title = "image " + (image_name.empty() ? integer(image) : image_name) + ", layer " + integer(num(at(q, "layer"))) +
                     ", head " + integer(num(at(q, "head"))) + ", query " + integer(num(at(q, "query"))) + " (" +
                     text(at(q, "query_kind")) + "): null " + format_near_one(num(at(q, "abstention")));
        const std::string id = "fig-abstain-" + std::to_string(k);
        page.ids.insert(id);
        b << "<div class=\"cell\"><h3>" << html_escape(page.names[k]) << "</h3>\n" << svg_bars(bars, id) << "</div>\n";
    }
    if (b.tellp() == 0) b << "<p class=\"na\">No configuration can abstain (all run softmax).</p>\n";
    return b.str();
}

std::string cell_abstaining(const json& c, const Summary& v) {
    const double a = v("abstaining_query_abstention");
    const json& q = at(c, "abstaining_query");
    if (!std::isfinite(a)) return kDash;
    if (!q.is_object()) return "null " + format_near_one(a);
    return "null " + format_near_one(a) + " (layer " + integer(num(at(q, "layer"))) + ", head " + integer(num(at(q, "head"))) + ")";
}

// One row of the property table and its figure, in page order.
struct Property {
    const char* name;
    const char* anchor;      // the figure's section
    const char* how;         // how to read the row
    const char* per_config;  // the id prefix of each configuration's own figure (null: the section's)
    const char* heading;     // the figure's, where it is not the property's name
    const char* caption;
    std::string (*figure)(Page&);  // the section's body
    std::string (*cell)(const json& config, const Summary& summary);
};
// The rows, and the published work or derivation each rests on: docs/design.md, "The study's
// property table".
const Property kProperties[] = {
    {"How heads do nothing", "fig-heads",
     "The share of heads that dump their attention on one key (with that key's kind underneath), that abstain (mean "
     "1 \u2212 \u03a3p > 0.5), or neither; registers, softmax-1 or sinks should move dumping heads off artifact and "
     "patch keys, onto register keys or into abstention.",
     "fig-heads-", nullptr,
     "Per layer, the fraction of heads that dump (top key mass > sink_alpha, split by the kind of that key), abstain, or neither.",
     figure_heads, cell_heads},
    {"Weights sum to", "fig-weights-sum",
     "The mean \u03a3p over images, heads and queries with [min, max]: exactly 1 for softmax; below 1 means heads use "
     "their freedom to abstain, and a low minimum means some queries attend to almost nothing.",
     nullptr, nullptr,
     "Mean over heads of \u03a3p (mean over images and queries) per layer; the band spans the smallest and largest \u03a3p "
     "over images, heads and queries.",
     figure_weights_sum, cell_weights_sum},
    {"Added cost", "fig-cost",
     "Parameters the mechanism adds (sink logits, trained register tokens) and the plain forward time per image at the "
     "main size; lower is cheaper, and test-time registers add no parameters.",
     nullptr, nullptr,
     "Plain forward time per image at the main size (mean of the faster of two passes) and the parameters the mechanism adds.",
     figure_cost, cell_cost},
    {"Massive activations", "fig-massive",
     "The largest |x| on the residual stream over the median |x| at the worst layer, and the kind of token holding it; "
     "smaller is better, and a massive activation on an artifact or patch token is the failure registers are meant to remove.",
     nullptr, nullptr,
     "Per layer, the largest |x| on the residual stream (after the block, over tokens \u00d7 channels) over the median |x|, "
     "and the kurtosis; the table lists each configuration's three largest entries at its worst layer.",
     figure_massive, cell_massive},
    {"INT8 viability", "fig-int8",
     "Cosine of the int8 CLS to the fp32 CLS with dynamic per-token and static per-tensor activation scales; near 1 is "
     "good, and per-tensor drops when massive activations stretch its static range.",
     nullptr, nullptr,
     "The int8 engine (W8A8) against the configuration at fp32 on the evaluation half: dynamic per-token activation scales, "
     "and static per-tensor ranges calibrated on the calibration half. The axis starts near the smallest cosine.",
     figure_int8, cell_int8},
    {"Window safety", "fig-eviction",
     "CLS cosine after evicting the sink keys, the artifact patches or the registers from every head's keys; near 1 means "
     "the model survives losing them, as a sliding window or token pruning would.",
     nullptr, nullptr,
     "The configuration with the sink keys, the artifact patches or the registers evicted from every head's keys (chosen per image "
     "by a first forward), against the configuration as given, on every image; a dash where there is nothing to evict.",
     figure_eviction, cell_eviction},
    {"Retrofit", "fig-retrofit",
     "For a softmax-trained checkpoint run with softmax: CLS cosine with softmax-1 dropped in, with fitted sink logits, "
     "and with those sinks and each head's sink key evicted; near 1 means no retraining is needed.",
     nullptr, nullptr,
     "A softmax-trained checkpoint changed without retraining, against itself as given, on the evaluation half: softmax-1 dropped in, "
     "sink logits fitted on the calibration half, and those sinks with each head's sink key evicted.",
     figure_retrofit, cell_retrofit},
    {"Mass vs number of keys", "fig-mass-tokens",
     "Mean mass \u03a3p at the smallest \u2192 largest size and its drift from the uniform-logit prediction "
     "\u03c3(z + log L); softmax stays at 1, and a drift near 0 means the heads keep their logits as L grows, so the gate's "
     "midpoint moves as \u2212log L.",
     "fig-mass-", "Mass vs number of keys, measured against fixed logits",
     "A head whose logit z does not change with the number of keys L has mass m(L) = \u03c3(z + log L) (derived from "
     "the normalizer's definition), so its gate's midpoint drifts as \u2212log L. Dashed: that curve through the "
     "smallest size's point; dots joined: the measured mean mass per size. "
     "Each panel's y axis spans its own values.",
     figure_mass_tokens, cell_mass_tokens},
    {"Abstaining query / the null slot", "fig-abstaining",
     "The largest null-slot weight (abstention) of any query, and where; its figure sets the query's weights beside "
     "softmax's on the same keys. A dash for softmax, which cannot abstain.",
     "fig-abstain-", "Abstaining query: the null slot of a real head (Miller 2023)",
     "The query with the largest abstention: its six largest key weights, the null slot and the rest, beside the same query's "
     "weights when the checkpoint runs with softmax (which has no null slot).",
     figure_abstaining, cell_abstaining},
};

// Where configuration k's cell of a row links: its own figure where one was drawn, else the section.
std::string link(const Page& page, const Property& row, std::size_t k) {
    if (row.per_config) {
        const std::string id = row.per_config + std::to_string(k);
        if (page.ids.count(id)) return id;
    }
    return row.anchor;
}

// The title and the line of what was run: sizes, resize, the calibration split and the rules.
std::string page_header(const Page& page) {
    const json& study = page.study;
    const json& sizes = at(study, "sizes");
    std::string size_list;
    for (std::size_t i = 0; i < count(sizes); ++i) size_list += (i ? ", " : "") + text(nth(sizes, i));
    const json& rules = at(study, "rules");
    const std::size_t images = count(at(study, "images")), nk = page.nk;
    const std::string split = images > 1 ? "calibration half " + std::to_string(count(at(study, "calibration_images"))) +
                                               " images, evaluation half " + std::to_string(count(at(study, "evaluation_images")))
                                         : std::string("one image: no calibration split");
    std::ostringstream body;
    body << "<h1>vitreg study: " << nk << " configuration" << (nk == 1 ? "" : "s") << ", " << images << " image" << (images == 1 ? "" : "s")
         << "</h1>\n<p class=\"meta\">sizes " << html_escape(size_list.empty() ? kDash : size_list) << " \u00b7 resize "
         << html_escape(text(at(study, "resize"))) << " \u00b7 " << split
         << " \u00b7 rules: mad_k " << format_number(num(at(rules, "mad_k")))
         << ", sink_alpha " << format_number(num(at(rules, "sink_alpha"))) << ", abstain " << format_number(num(at(rules, "abstain")))
         << " \u00b7 every cell links to its figure</p>\n";
    return body.str();
}

// The property table, measured (one column per configuration), then how to read each row.
std::string property_table(const Page& page) {
    std::ostringstream body;
    body << "<table class=\"props\"><thead><tr><th>property</th>";
    for (std::size_t k = 0; k < page.nk; ++k) {
        const json& c = nth(page.configs, k);
        body << "<th><span class=\"swatch\" style=\"background:" << palette_colour(k) << "\"></span>" << html_escape(page.names[k])
             << "<br><small>" << html_escape(text(at(c, "attention"))) << " \u00b7 " << html_escape(text(at(c, "precision")))
             << " \u00b7 " << integer(num(at(c, "registers"))) << " reg</small></th>";
    }
    body << "</tr></thead><tbody>\n";
    int number = 0;
    for (const Property& row : kProperties) {
        body << "<tr><th>" << ++number << " \u00b7 " << row.name << "</th>";
        for (std::size_t k = 0; k < page.nk; ++k) {
            const json& c = nth(page.configs, k);
            body << "<td><a href=\"#" << link(page, row, k) << "\">" << row.cell(c, Summary{at(c, "summary")}) << "</a></td>";
        }
        body << "</tr>\n";
    }
    body << "</tbody></table>\n<h2>How to read it</h2>\n<ol class=\"howto\">";
    for (const auto& p : kProperties) body << "<li><b>" << p.name << ":</b> " << p.how << "</li>";
    body << "</ol>\n";
    return body.str();
}

// The page around its content, which tells how many figures it holds.
std::string page_html(const std::string& content) {
    std::size_t figures = 0;
    const std::string marker = std::string("<svg class=\"") + kFigureClass + "\"";
    for (std::size_t pos = content.find(marker); pos != std::string::npos; pos = content.find(marker, pos + 1)) ++figures;
    std::ostringstream o;
    o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vitreg study</title><style>" << report_style()
      << R"(
body{margin:16px 24px}h1{font-size:20px;margin:0 0 4px}.meta{font-size:12px;color:#555;margin:0 0 8px}
table.props{font-size:13px}table.props td{text-align:left;vertical-align:top;max-width:240px;padding:4px 6px}
table.props th{cursor:default;text-align:left;vertical-align:top;overflow-wrap:anywhere;max-width:240px;font-weight:600}
table.props tbody th{white-space:nowrap;background:#f8f8f8}table.props a{color:#123;text-decoration:none}
table.props a:hover{text-decoration:underline}table.props small{color:#666}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px}
.howto{font-size:12px;color:#333;max-width:1300px;margin:4px 0;padding-left:20px}.howto li{margin:1px 0}
section{margin-top:18px;border-top:1px solid #ddd}h3{font-size:14px;margin:10px 0 2px}.cap{font-size:12px;color:#555;max-width:1100px}
.multiples{display:grid;gap:0 4px;justify-content:start}.multiples .plot{margin:0}
p.na{color:#777;font-size:13px}
table.small td{text-align:left}.cell{display:inline-block;vertical-align:top;margin-right:12px}
)"
      << "</style></head>\n<body data-figures=\"" << figures << "\">\n"
      << content << "</body></html>\n";
    return o.str();
}

}  // namespace

std::string study_html(const json& study) {
    const json& configs = at(study, "configs");
    Page page{study, configs, count(configs), names_of(configs), {}};
    // The figures first: the table links to the per-configuration figures they drew.
    std::ostringstream figs;
    int number = 0;
    for (const Property& row : kProperties)
        section(figs, row.anchor, ++number, row.heading ? row.heading : row.name, row.caption, row.figure(page));
    return page_html(page_header(page) + property_table(page) + figs.str());
}

}  // namespace vitreg::render
