#include "vitreg/analysis/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// The output-layer statistics of one image under one configuration: a row of stats.csv.
StatsRow stats_row(const std::string& image, const LabelledModel& cfg, const Inspection& in, const ImageStats& s) {
    const Config& c = cfg.model.config();
    const LayerStats& o = s.layers.back();
    const int last = c.depth - 1;
    auto f = [](double v) {
        std::ostringstream os;
        os.precision(6);
        os << v;
        return os.str();
    };
    return {
        {"image", image},
        {"config", cfg.label},
        {"attention", to_string(c.attention)},
        {"precision", cfg.model.precision().describe()},
        {"intervention", cfg.model.intervention().to_string()},
        {"retrofit", c.retrofit() ? "true" : "false"},
        {"registers", std::to_string(cfg.model.registers())},
        {"test_time_registers", std::to_string(cfg.model.intervention().test_time_registers)},
        {"grid", std::to_string(in.trace.grid_h) + "x" + std::to_string(in.trace.grid_w)},
        {"norm_median", f(o.norm_median)},
        {"norm_max", f(o.norm_max)},
        {"norm_max_over_median", f(o.norm_median > 0 ? o.norm_max / o.norm_median : 0)},
        {"robust_threshold", f(o.robust_threshold)},
        {"artifacts_abs", std::to_string(o.artifacts_abs)},
        {"artifact_fraction_abs", f(o.artifact_fraction_abs)},
        {"artifacts_robust", std::to_string(o.artifacts_robust)},
        {"artifact_fraction_robust", f(o.artifact_fraction_robust)},
        {"artifacts_flagged", std::to_string(o.artifacts_flagged)},
        {"artifact_fraction_flagged", f(o.artifact_fraction_flagged)},
        {"max_inf_norm", f(o.max_inf_norm)},
        {"kurtosis", f(o.kurtosis)},
        {"sink_rate", f(s.sink_rate(last))},
        {"top_key_mass", f(s.top_key_mass(last))},
        {"mean_abstention", f(s.mean_abstention(last))},
        {"cls_on_registers", f(s.cls_on_registers(last))},
    };
}

// The statistics of stats.csv (the columns after "grid") where a lower mean is better: the
// artifact-related ones. The others (norm_median, norm_max, robust_threshold, mean_abstention,
// cls_on_registers) describe the model and are not ranked.
bool lower_is_better(const std::string& column) {
    static const char* const kLower[] = {"norm_max_over_median", "artifacts_abs", "artifact_fraction_abs", "artifacts_robust",
                                         "artifact_fraction_robust", "artifacts_flagged", "artifact_fraction_flagged", "max_inf_norm", "kurtosis", "sink_rate", "top_key_mass"};
    return std::find(std::begin(kLower), std::end(kLower), column) != std::end(kLower);
}

// Per configuration, the mean and sample standard deviation (n - 1; 0 for one image) over images
// of each numeric column of stats.csv, read back from the rows as written (so that they are what
// a reader of stats.csv computes); the best configurations of a ranked column hold its lowest
// mean (none when every configuration ties, as one alone does). The one source of the summary
// in report.html, on the terminal and in stats.json.
std::vector<ColumnSummary> summarize(const std::vector<std::vector<CompareCell>>& cells) {
    std::vector<ColumnSummary> out;
    const std::size_t configs = cells.front().size();
    const StatsRow& first = cells.front().front().row;
    std::size_t c0 = 0;
    while (c0 < first.size() && first[c0].first != "grid") ++c0;
    for (std::size_t c = c0 + 1; c < first.size(); ++c) {
        ColumnSummary col{first[c].first, std::vector<double>(configs, 0.0), std::vector<double>(configs, 0.0),
                          lower_is_better(first[c].first), std::vector<bool>(configs, false)};
        std::vector<std::vector<double>> values(configs);
        for (const auto& image : cells)
            for (std::size_t k = 0; k < configs; ++k) values[k].push_back(std::stod(image[k].row[c].second));
        for (std::size_t k = 0; k < configs; ++k) {
            const auto& v = values[k];
            double sum = 0, squares = 0;
            for (double x : v) sum += x;
            col.mean[k] = sum / v.size();
            for (double x : v) squares += (x - col.mean[k]) * (x - col.mean[k]);
            col.sd[k] = v.size() > 1 ? std::sqrt(squares / (v.size() - 1)) : 0.0;
        }
        if (col.lower_is_better) {
            const double lowest = *std::min_element(col.mean.begin(), col.mean.end());
            const auto ties = std::count(col.mean.begin(), col.mean.end(), lowest);
            for (std::size_t k = 0; k < configs; ++k) col.best[k] = col.mean[k] == lowest && static_cast<std::size_t>(ties) < configs;
        }
        out.push_back(std::move(col));
    }
    return out;
}

std::string csv_field(const std::string& v) {
    if (v.find_first_of(",\"\n") == std::string::npos) return v;
    std::string out = "\"";
    for (char ch : v) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
}

}  // namespace

CompareResult compare(const std::vector<LabelledModel>& configs, const std::vector<std::string>& images,
                      const CompareOptions& options) {
    if (configs.empty()) throw UsageError("compare: no configurations given");
    if (images.empty()) throw UsageError("no images given");
    CompareResult r{configs, images, options.rules, {}, {}};
    r.cells.resize(images.size());
    // Each configuration's rule holds its own model's defect directions.
    std::vector<ArtifactRules> rules(configs.size(), options.rules);
    std::vector<Probe> probes;
    for (std::size_t k = 0; k < configs.size(); ++k) {
        rules[k].rule = options.rules.rule.for_model(configs[k].model);
        probes.push_back(Probe::statistics(configs[k].model.config().depth));
        rules[k].rule.ask(probes.back());
    }
    for (std::size_t i = 0; i < images.size(); ++i)
        for (std::size_t k = 0; k < configs.size(); ++k) {
            const auto& cfg = configs[k];
            CompareCell cell;
            cell.inspection = inspect(cfg.model, images[i], options.resize, probes[k], options.threads);
            cell.stats = image_stats(cell.inspection.trace, 0, rules[k]);
            cell.row = stats_row(images[i], cfg, cell.inspection, cell.stats);
            r.cells[i].push_back(std::move(cell));
        }
    r.summary = summarize(r.cells);
    return r;
}

nlohmann::json to_json(const CompareResult& r) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& image : r.cells)
        for (std::size_t k = 0; k < image.size(); ++k) {
            const CompareCell& cell = image[k];
            nlohmann::json full;
            for (const auto& [key, value] : cell.row) full[key] = value;
            full["model"] = r.configs[k].model.path();
            full["per_layer"] = stats_json(cell.stats, r.rules, cell.inspection.trace);
            rows.push_back(full);
        }
    nlohmann::json summary = {{"sd", "sample standard deviation over images (n - 1); 0 for one image"},
                              {"images", r.images.size()},
                              {"lower_is_better", nlohmann::json::array()},
                              {"configs", nlohmann::json::array()}};
    for (const auto& col : r.summary)
        if (col.lower_is_better) summary["lower_is_better"].push_back(col.column);
    for (std::size_t k = 0; k < r.configs.size(); ++k) {
        nlohmann::json columns = nlohmann::json::object(), best = nlohmann::json::array();
        for (const auto& col : r.summary) {
            columns[col.column] = {{"mean", col.mean[k]}, {"sd", col.sd[k]}};
            if (col.best[k]) best.push_back(col.column);
        }
        summary["configs"].push_back({{"config", r.configs[k].label}, {"columns", columns}, {"best", best}});
    }
    return {{"norm_threshold", r.rules.norm_threshold},
            {"mad_k", r.rules.rule.mad_k},
            {"artifact_rule", r.rules.rule.to_json()},
            {"sink_alpha", r.rules.sink_alpha},
            {"layer", "all summary fields describe the last layer (the output)"},
            {"summary", summary},
            {"rows", rows}};
}

std::string stats_csv(const CompareResult& r) {
    std::string csv;
    const StatsRow& header = r.cells.front().front().row;
    for (std::size_t c = 0; c < header.size(); ++c) csv += (c ? "," : "") + header[c].first;
    csv += "\n";
    for (const auto& image : r.cells)
        for (const auto& cell : image) {
            for (std::size_t c = 0; c < cell.row.size(); ++c) csv += (c ? "," : "") + csv_field(cell.row[c].second);
            csv += "\n";
        }
    return csv;
}

std::string summary_text(const CompareResult& r) {
    auto width = [](const std::string& s) {  // display columns: UTF-8 code points
        return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
    };
    auto pad = [&](const std::string& s, std::size_t n, bool right) {
        const std::string fill(n > width(s) ? n - width(s) : 0, ' ');
        return right ? fill + s : s + fill;
    };
    const std::size_t configs = r.configs.size(), images = r.images.size();
    std::vector<std::vector<std::string>> cells;  // [statistic][configuration]
    std::size_t name_w = 9, cell_w = 4;
    for (const auto& col : r.summary) {
        name_w = std::max(name_w, col.column.size());
        cells.emplace_back();
        for (std::size_t k = 0; k < configs; ++k) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.4g \u00b1 %.3g%s", col.mean[k], col.sd[k], col.best[k] ? " *" : "  ");
            cells.back().push_back(buf);
            cell_w = std::max(cell_w, width(buf));
        }
    }
    std::ostringstream o;
    o << "summary over " << images << " image" << (images == 1 ? "" : "s")
      << " (mean \u00b1 sample sd; * = lowest mean, on the artifact-related statistics):\n";
    for (std::size_t k = 0; k < configs; ++k) o << "  [" << k + 1 << "] " << r.configs[k].label << "\n";
    o << pad("statistic", name_w, false);
    for (std::size_t k = 0; k < configs; ++k) o << "  " << pad("[" + std::to_string(k + 1) + "]  ", cell_w, true);
    o << "\n";
    for (std::size_t c = 0; c < r.summary.size(); ++c) {
        o << pad(r.summary[c].column, name_w, false);
        for (const auto& cell : cells[c]) o << "  " << pad(cell, cell_w, true);
        o << "\n";
    }
    return o.str();
}

}  // namespace vitreg
