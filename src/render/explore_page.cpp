#include "vitreg/render/explore_page.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>

#include "explore_assets.hpp"
#include "vitreg/error.hpp"
#include "core/parse_number.hpp"
#include "vitreg/render/render.hpp"
#include "vitreg/render/report.hpp"

namespace vitreg::render {

namespace {

using nlohmann::json;

int parse_count(const std::string& text, const std::string& what) {
    const auto v = parse_integer(text, -1000000, 1000000);
    if (!v) throw UsageError(what + " '" + text + "' is not a whole number");
    return static_cast<int>(*v);
}

std::string deflate(const std::vector<std::uint8_t>& bytes) {
    uLongf size = compressBound(static_cast<uLong>(bytes.size()));
    std::string out(size, '\0');
    if (compress2(reinterpret_cast<Bytef*>(out.data()), &size, bytes.data(), static_cast<uLong>(bytes.size()), 6) != Z_OK)
        throw Error("explore page: zlib could not compress " + std::to_string(bytes.size()) + " bytes");
    out.resize(size);
    return out;
}

// A non-negative array as Q8: one byte per value, one float32 scale per last-axis row.
json q8(const float* values, const std::vector<int>& shape) {
    const std::size_t n = static_cast<std::size_t>(shape.back());
    const std::size_t total = std::accumulate(shape.begin(), shape.end(), std::size_t(1),
                                              [](std::size_t a, int d) { return a * static_cast<std::size_t>(d); });
    const std::size_t rows = n ? total / n : 0;
    std::vector<std::uint8_t> bytes(total);
    std::vector<float> scales(rows);
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = values + r * n;
        float top = 0;
        for (std::size_t i = 0; i < n; ++i)
            if (std::isfinite(row[i])) top = std::max(top, row[i]);
        scales[r] = top / 255.0f;
        for (std::size_t i = 0; i < n; ++i) {
            const float v = std::isfinite(row[i]) && top > 0 ? std::clamp(row[i] / top * 255.0f, 0.0f, 255.0f) : 0.0f;
            bytes[r * n + i] = static_cast<std::uint8_t>(std::lround(v));
        }
    }
    std::string scale_bytes(scales.size() * sizeof(float), '\0');  // x86: already little-endian
    if (!scales.empty()) std::memcpy(scale_bytes.data(), scales.data(), scale_bytes.size());
    return {{"shape", shape}, {"codec", "deflate"}, {"data", base64(deflate(bytes))}, {"scale", base64(scale_bytes)}};
}

json q8(const std::vector<float>& values, const std::vector<int>& shape) { return q8(values.data(), shape); }

std::string picture(const cv::Mat& input) { return "data:image/png;base64," + base64(png_bytes(input)); }

bool same_picture(const cv::Mat& a, const cv::Mat& b) {
    return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

// Rows of every layer and head for `queries`: [layers, heads, queries, tokens].
std::vector<float> stored_rows(const Exploration& e, const std::vector<int>& queries) {
    const Trace& t = e.trace();
    const std::size_t per_layer = static_cast<std::size_t>(t.heads) * queries.size() * t.tokens;
    std::vector<float> rows(per_layer * t.layers);
    for (int l = 0; l < t.layers; ++l) {
        const QueryAttention a = query_attention(e.model(), t, l, 0, queries);
        std::copy(a.rows.begin(), a.rows.end(), rows.begin() + static_cast<std::ptrdiff_t>(l * per_layer));
    }
    return rows;
}

std::size_t fixed_bytes(const Trace& t) {  // norms, key mass and abstention
    return static_cast<std::size_t>(t.layers) * t.tokens * (1 + 2 * static_cast<std::size_t>(t.heads));
}

}  // namespace

QuerySelection QuerySelection::parse(const std::string& text) {
    QuerySelection s;
    if (text == "auto") return s;
    if (text == "all") {
        s.kind = Kind::All;
        return s;
    }
    if (text == "cls") {
        s.kind = Kind::Cls;
        return s;
    }
    const std::string what = "--queries '" + text + "'";
    if (text.rfind("stride:", 0) == 0) {
        s.kind = Kind::Stride;
        s.stride = parse_count(text.substr(7), what + ": the stride");
        if (s.stride < 1) throw UsageError(what + ": the stride must be at least 1");
        return s;
    }
    s.kind = Kind::Patches;
    for (const std::string& item : split(text, ';')) {
        const auto rc = split(item, ',');
        if (rc.size() != 2)
            throw UsageError(what + ": expected auto, all, cls, stride:S or R,C;R,C;... (bad entry '" + item + "')");
        s.patches.emplace_back(parse_count(rc[0], what + ": the row"), parse_count(rc[1], what + ": the column"));
    }
    return s;
}

std::string QuerySelection::to_string() const {
    switch (kind) {
        case Kind::Auto: return "auto";
        case Kind::All: return "all";
        case Kind::Cls: return "cls";
        case Kind::Stride: return "stride:" + std::to_string(stride);
        case Kind::Patches: break;
    }
    std::string out;
    for (const auto& [r, c] : patches) out += (out.empty() ? "" : ";") + std::to_string(r) + "," + std::to_string(c);
    return out;
}

std::vector<int> QuerySelection::tokens(const Trace& t, int auto_stride) const {
    std::vector<int> out;
    for (int i = 0; i < t.patch_offset(); ++i) out.push_back(i);  // CLS and the registers
    const auto every = [&](int s) {
        const int r0 = ((t.grid_h - 1) % s) / 2, c0 = ((t.grid_w - 1) % s) / 2;
        for (int r = r0; r < t.grid_h; r += s)
            for (int c = c0; c < t.grid_w; c += s) out.push_back(t.patch_offset() + r * t.grid_w + c);
    };
    switch (kind) {
        case Kind::Auto: every(auto_stride); break;
        case Kind::All: every(1); break;
        case Kind::Cls:
            out.resize(std::min<std::size_t>(out.size(), 1));
            break;
        case Kind::Stride: every(stride); break;
        case Kind::Patches:
            for (const auto& [r, c] : patches) {
                if (r < 0 || r >= t.grid_h || c < 0 || c >= t.grid_w)
                    throw UsageError("--queries: patch " + std::to_string(r) + "," + std::to_string(c) + " is outside the " +
                                     std::to_string(t.grid_h) + "x" + std::to_string(t.grid_w) + " grid");
                const int token = t.patch_offset() + r * t.grid_w + c;
                if (std::find(out.begin(), out.end(), token) == out.end()) out.push_back(token);
            }
            break;
    }
    return out;
}

std::size_t stored_row_bytes(const Trace& t, std::size_t queries, bool rollout) {
    const std::size_t rows = queries * (static_cast<std::size_t>(t.layers) * t.heads + (rollout ? 1 : 0));
    return rows * (static_cast<std::size_t>(t.tokens) + sizeof(float));
}

json config_entry(const Exploration& e, const std::vector<int>* queries, bool rollout) {
    const Trace& t = e.trace();
    const Model& m = e.model();
    const Config& c = m.config();
    const int L = t.layers, H = t.heads, N = t.tokens;
    json outlines = json::array(), thresholds = json::array();
    for (const auto& layer : e.stats().layers) {
        outlines.push_back(layer.artifact_tokens_flagged);
        thresholds.push_back(layer.robust_threshold);
    }
    json entry = {{"label", e.label()},
                  {"attention", to_string(c.attention)},
                  {"precision", m.precision().describe()},
                  {"intervention", m.intervention().to_string()},
                  {"layers", L},
                  {"heads", H},
                  {"tokens", N},
                  {"grid", {t.grid_h, t.grid_w}},
                  {"patch", c.patch},
                  {"class_token", t.class_token},
                  {"registers", t.registers},
                  {"test_time_registers", t.test_time_registers},
                  {"norms", q8(t.norms, {L, N})},
                  {"key_mass", q8(t.key_mass, {L, H, N})},
                  {"abstention", q8(t.abstention, {L, H, N})},
                  {"outlines", outlines},
                  {"artifact_rule", e.artifact_rule().to_json()},
                  {"robust_threshold", thresholds},
                  {"queries", queries ? *queries : std::vector<int>{}},
                  {"rows", nullptr},
                  {"rollout", nullptr}};
    if (queries && !queries->empty()) {
        const int Q = static_cast<int>(queries->size());
        entry["rows"] = q8(stored_rows(e, *queries), {L, H, Q, N});
        if (rollout) entry["rollout"] = q8(e.rollout_rows(*queries), {Q, N});
    }
    return entry;
}

json image_entry(const std::string& name, const std::vector<const Exploration*>& views, const std::vector<std::vector<int>>* queries,
                 bool rollout) {
    if (views.empty()) throw UsageError("explore: no configuration to show");
    const cv::Mat& first = views.front()->input();
    json configs = json::array();
    for (std::size_t i = 0; i < views.size(); ++i) {
        json c = config_entry(*views[i], queries ? &(*queries)[i] : nullptr, rollout);
        const cv::Mat& input = views[i]->input();
        if (i > 0 && !same_picture(input, first))  // preprocessed otherwise (another size, mean, crop)
            c.update({{"picture", picture(input)}, {"width", input.cols}, {"height", input.rows}});
        configs.push_back(std::move(c));
    }
    return {{"name", name}, {"picture", picture(first)}, {"width", first.cols}, {"height", first.rows}, {"configs", std::move(configs)}};
}

json query_entry(const Exploration& e, int query, bool rollout) {
    const Trace& t = e.trace();
    const std::vector<int> one{query};  // query_attention refuses one out of range
    json out = {{"rows", q8(stored_rows(e, one), {t.layers, t.heads, 1, t.tokens})}, {"rollout", nullptr}};
    if (rollout) out["rollout"] = q8(e.rollout_rows(one), {1, t.tokens});
    return out;
}

std::string explore_page(const json& data) {
    std::string text = data.dump();
    // Inside <script>, "</" could close the element: JSON allows "<\/" for it.
    std::string safe;
    safe.reserve(text.size() + 16);
    for (std::size_t i = 0; i < text.size(); ++i) {
        safe += text[i];
        if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') safe += '\\';
    }
    return std::string("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>") +
           html_escape(data.value("title", std::string("vitreg explore"))) + "</title><style>\n" + explore_css() +
           "\n</style></head><body><div id=\"app\"></div>\n<script id=\"vitreg-data\" type=\"application/json\">" + safe +
           "</script>\n<script>\n" + explore_js() + "\n</script></body></html>\n";
}

std::string static_explore_page(const std::vector<PageConfig>& configs, const std::vector<std::string>& images,
                                const ResizeSpec& spec, const ImageLimits& limits, const PageOptions& options, int threads,
                                const std::function<void(const std::string&)>& note) {
    if (configs.empty()) throw UsageError("explore: no configuration given");
    if (images.empty()) throw UsageError("explore: no image given");
    // Every image through every configuration first: the budget needs every shape.
    std::vector<std::vector<std::unique_ptr<Exploration>>> views(images.size());
    for (std::size_t i = 0; i < images.size(); ++i)
        for (const auto& c : configs) {
            const Pixels px = load_pixels(images[i], spec, c.model->config(), limits);
            c.model->check_tokens(px.height, px.width, options.max_tokens, images[i]);
            views[i].push_back(std::make_unique<Exploration>(*c.model, c.label, px, threads, options.max_tokens, c.rule));
        }
    const auto bytes_at = [&](int stride) {
        std::size_t total = 0;
        for (const auto& per_image : views)
            for (const auto& v : per_image) {
                const std::size_t q = options.queries.tokens(v->trace(), stride).size();
                total += (stored_row_bytes(v->trace(), q, options.rollout) + fixed_bytes(v->trace())) * 4 / 3;  // base64
            }
        return total;
    };
    int stride = 1;
    if (options.queries.kind == QuerySelection::Kind::Auto) {
        int widest = 1;
        for (const auto& per_image : views)
            for (const auto& v : per_image) widest = std::max({widest, v->trace().grid_h, v->trace().grid_w});
        while (stride < widest && bytes_at(stride) > options.max_bytes) ++stride;
        if (note)
            note(stride == 1 ? "storing every query's rows"
                             : "storing the rows of the patches at stride " + std::to_string(stride) + " (one in " +
                                   std::to_string(stride) + "x" + std::to_string(stride) + "), CLS and the registers: every query would exceed the " +
                                   std::to_string(options.max_bytes >> 20) + " MiB budget (--queries all or --max-page-mb to change)");
    }
    const std::size_t estimate = bytes_at(stride);
    if (estimate > options.max_bytes)
        throw UsageError("explore: the page would take about " + std::to_string(estimate >> 20) + " MiB of rows, over its " +
                         std::to_string(options.max_bytes >> 20) +
                         " MiB budget: store fewer queries (--queries stride:S or R,C;...), fewer images or "
                         "configurations, or raise --max-page-mb");
    json list = json::array();
    for (std::size_t i = 0; i < images.size(); ++i) {
        std::vector<const Exploration*> per;
        std::vector<std::vector<int>> queries;
        for (const auto& v : views[i]) {
            per.push_back(v.get());
            queries.push_back(options.queries.tokens(v->trace(), stride));
        }
        const std::size_t slash = images[i].find_last_of('/');
        list.push_back(image_entry(slash == std::string::npos ? images[i] : images[i].substr(slash + 1), per, &queries, options.rollout));
        views[i].clear();  // its q/k are no longer needed
    }
    return explore_page({{"format", "vitreg-explore/1"}, {"live", false}, {"title", options.title}, {"images", std::move(list)}});
}

}  // namespace vitreg::render
