// vitreg compare MODEL[@KIND]... --images IMAGE... -o OUT_DIR: the same images through several
// configurations, side by side: compare.png, stats.csv, stats.json and report.html.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/analysis/inspect.hpp"
#include "vitreg/analysis/model_spec.hpp"
#include "vitreg/render/report.hpp"
#include "vitreg/render/views.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::cli {

namespace {

// The output-layer statistics of one image under one configuration: a row of stats.csv.
std::vector<std::pair<std::string, std::string>> summary_row(const std::string& image, const Configuration& cfg,
                                                             const Inspection& in, const ImageStats& s) {
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
                                         "artifact_fraction_robust", "max_inf_norm", "kurtosis", "sink_rate", "top_key_mass"};
    return std::find(std::begin(kLower), std::end(kLower), column) != std::end(kLower);
}

// Per configuration, the mean and sample standard deviation (n - 1; 0 for one image) over images
// of each numeric column of stats.csv, read back from the rows as written; the best configurations
// of a ranked column hold its lowest mean (none when every configuration ties, as one alone does).
// rows: image-major, configs rows per image. The one source of the summary in report.html,
// on the terminal and in stats.json.
std::vector<render::ColumnSummary> summarize(const std::vector<std::vector<std::pair<std::string, std::string>>>& rows,
                                             std::size_t configs) {
    std::vector<render::ColumnSummary> out;
    const auto& first = rows.front();
    std::size_t c0 = 0;
    while (c0 < first.size() && first[c0].first != "grid") ++c0;
    for (std::size_t c = c0 + 1; c < first.size(); ++c) {
        render::ColumnSummary col{first[c].first, std::vector<double>(configs, 0.0), std::vector<double>(configs, 0.0),
                                  lower_is_better(first[c].first), std::vector<bool>(configs, false)};
        std::vector<std::vector<double>> values(configs);
        for (std::size_t r = 0; r < rows.size(); ++r) values[r % configs].push_back(std::stod(rows[r][c].second));
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

// The summary as an aligned plain-text table: one line per statistic, one column per
// configuration (numbered, the labels listed above), "*" on the best.
std::string summary_text(const std::vector<render::ColumnSummary>& summary, const std::vector<std::string>& labels, std::size_t images) {
    auto width = [](const std::string& s) {  // display columns: UTF-8 code points
        return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
    };
    auto pad = [&](const std::string& s, std::size_t n, bool right) {
        const std::string fill(n > width(s) ? n - width(s) : 0, ' ');
        return right ? fill + s : s + fill;
    };
    std::vector<std::vector<std::string>> cells;  // [statistic][configuration]
    std::size_t name_w = 9, cell_w = 4;
    for (const auto& col : summary) {
        name_w = std::max(name_w, col.column.size());
        cells.emplace_back();
        for (std::size_t k = 0; k < labels.size(); ++k) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.4g \u00b1 %.3g%s", col.mean[k], col.sd[k], col.best[k] ? " *" : "  ");
            cells.back().push_back(buf);
            cell_w = std::max(cell_w, width(buf));
        }
    }
    std::ostringstream o;
    o << "summary over " << images << " image" << (images == 1 ? "" : "s")
      << " (mean \u00b1 sample sd; * = lowest mean, on the artifact-related statistics):\n";
    for (std::size_t k = 0; k < labels.size(); ++k) o << "  [" << k + 1 << "] " << labels[k] << "\n";
    o << pad("statistic", name_w, false);
    for (std::size_t k = 0; k < labels.size(); ++k) o << "  " << pad("[" + std::to_string(k + 1) + "]  ", cell_w, true);
    o << "\n";
    for (std::size_t c = 0; c < summary.size(); ++c) {
        o << pad(summary[c].column, name_w, false);
        for (const auto& cell : cells[c]) o << "  " << pad(cell, cell_w, true);
        o << "\n";
    }
    return o.str();
}

std::string csv_field(const std::string& v) {
    if (v.find_first_of(",\"\n") == std::string::npos) return v;
    std::string out = "\"";
    for (char ch : v) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
}

}  // namespace

void register_compare(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("compare", "the same images through several configurations, side by side");
    struct Args {
        std::vector<std::string> models, images;
        std::string out;
        PixelArgs pixels;
        ArtifactRules rules;
        int threads = 0;
    };
    auto a = std::make_shared<Args>();
    cmd->add_option("MODEL", a->models, "checkpoints (file, folder or shipped name), each optionally @softmax|@softmax1|@sink and "
                    "@fp32|@bf16|@int8|@int8=SCALES.json, e.g. MODEL@softmax1@int8")
        ->required();
    cmd->add_option("--images", a->images, "image files, folders or @list.txt")->required();
    cmd->add_option("-o,--out", a->out, "output folder")->required();
    add_pixel_args(*cmd, a->pixels, "eval | none | WxH | short:N | long:N");
    cmd->add_option("--norm-threshold", a->rules.norm_threshold, "absolute artifact threshold on token norms")->capture_default_str();
    cmd->add_option("--mad-k", a->rules.mad_k, "model-free rule: norm > median + k*MAD")->capture_default_str();
    cmd->add_option("--threads", a->threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
    cmd->callback([&run, a] {
        run = [a] {
            const ResizeSpec resize = pixel_spec(a->pixels);
            const auto images = expand_inputs(a->images);
            if (images.empty()) throw UsageError("no images given");
            std::vector<Configuration> configs;
            for (const auto& spec : a->models) configs.push_back(load_configuration(spec));

            // Everything is computed before anything is written: a bad image leaves no output.
            struct Cell {
                Inspection in;
                ImageStats stats;
                cv::Mat image;
            };
            std::vector<std::vector<Cell>> cells(images.size());
            for (std::size_t i = 0; i < images.size(); ++i)
                for (const auto& cfg : configs) {
                    Cell cell;
                    cell.in = inspect(cfg.model, images[i], resize, Probe::statistics(cfg.model.config().depth), a->threads);
                    cell.stats = image_stats(cell.in.trace, 0, a->rules);
                    cell.image = render::fit(render::input_image(cell.in.pixels, cfg.model.config().mean, cfg.model.config().std), 224);
                    cells[i].push_back(std::move(cell));
                }

            // compare.png: per configuration the last layer's CLS attention (mean of heads) and the
            // output patch norms on one scale per configuration, artifacts outlined.
            std::vector<float> norm_max(configs.size(), 0.0f);
            for (const auto& row : cells)
                for (std::size_t k = 0; k < configs.size(); ++k) norm_max[k] = std::max(norm_max[k], row[k].stats.layers.back().norm_max);
            std::vector<std::string> columns, row_labels;
            for (const auto& cfg : configs) {
                columns.push_back(cfg.label + "\nCLS attention");
                columns.push_back(cfg.label + "\npatch norms");
            }
            std::vector<std::vector<cv::Mat>> tiles;
            for (std::size_t i = 0; i < images.size(); ++i) {
                row_labels.push_back(images[i].substr(images[i].find_last_of('/') + 1));
                std::vector<cv::Mat> row;
                for (std::size_t k = 0; k < configs.size(); ++k) {
                    const Cell& cell = cells[i][k];
                    const Trace& t = cell.in.trace;
                    const int last = t.layers - 1;
                    const auto rows = t.query_rows(t.attention_slot(last), 0, t.query_slot(0));
                    row.push_back(render::attention_tile(cell.image, fuse_heads(rows.data(), t.heads, t.tokens, HeadFusion::Mean).data(), t));
                    cv::Mat norms = render::norms_tile(cell.image, t.norms_of(last, 0), t, 0.0f, norm_max[k],
                                                       cell.stats.layers.back().artifact_tokens_robust);
                    std::ostringstream cap;
                    cap.precision(3);
                    cap << "max " << cell.stats.layers.back().norm_max << ", " << cell.stats.layers.back().artifacts_robust << " outlined";
                    render::caption(norms, cap.str());
                    row.push_back(norms);
                }
                tiles.push_back(std::move(row));
            }
            const cv::Mat grid = render::labelled_grid(
                tiles, columns, row_labels,
                "last layer: CLS attention (mean of heads) | output patch norms (one scale per configuration; outlined: > median + " +
                    std::to_string(static_cast<int>(a->rules.mad_k)) + "*MAD)");

            // stats rows, per-layer series and histograms.
            std::vector<std::vector<std::pair<std::string, std::string>>> rows;
            nlohmann::json json_rows = nlohmann::json::array();
            std::vector<render::ReportSeries> max_norm(configs.size()), fraction(configs.size());
            std::vector<std::vector<float>> output_norms(configs.size());
            for (std::size_t k = 0; k < configs.size(); ++k) {
                const int depth = configs[k].model.config().depth;
                max_norm[k] = {configs[k].label, std::vector<double>(depth, 0.0)};
                fraction[k] = {configs[k].label, std::vector<double>(depth, 0.0)};
            }
            for (std::size_t i = 0; i < images.size(); ++i)
                for (std::size_t k = 0; k < configs.size(); ++k) {
                    const Cell& cell = cells[i][k];
                    rows.push_back(summary_row(images[i], configs[k], cell.in, cell.stats));
                    nlohmann::json full;
                    for (const auto& [key, value] : rows.back()) full[key] = value;
                    full["model"] = configs[k].model.path();
                    full["per_layer"] = stats_json(cell.stats, a->rules, cell.in.trace);
                    json_rows.push_back(full);
                    for (const auto& l : cell.stats.layers) {
                        max_norm[k].values[l.layer] += l.norm_max / images.size();
                        fraction[k].values[l.layer] += l.artifact_fraction_robust / images.size();
                    }
                    const auto out = render::patch_grid(cell.in.trace.norms_of(cell.in.trace.layers - 1, 0), cell.in.trace);
                    output_norms[k].insert(output_norms[k].end(), out.begin(), out.end());
                }

            std::string csv;
            for (std::size_t c = 0; c < rows.front().size(); ++c) csv += (c ? "," : "") + rows.front()[c].first;
            csv += "\n";
            for (const auto& r : rows) {
                for (std::size_t c = 0; c < r.size(); ++c) csv += (c ? "," : "") + csv_field(r[c].second);
                csv += "\n";
            }
            std::vector<std::string> labels;
            for (const auto& cfg : configs) labels.push_back(cfg.label);
            const std::vector<render::ColumnSummary> summary = summarize(rows, configs.size());
            nlohmann::json json_summary = {{"sd", "sample standard deviation over images (n - 1); 0 for one image"},
                                           {"images", images.size()},
                                           {"lower_is_better", nlohmann::json::array()},
                                           {"configs", nlohmann::json::array()}};
            for (const auto& col : summary)
                if (col.lower_is_better) json_summary["lower_is_better"].push_back(col.column);
            for (std::size_t k = 0; k < configs.size(); ++k) {
                nlohmann::json columns = nlohmann::json::object(), best = nlohmann::json::array();
                for (const auto& col : summary) {
                    columns[col.column] = {{"mean", col.mean[k]}, {"sd", col.sd[k]}};
                    if (col.best[k]) best.push_back(col.column);
                }
                json_summary["configs"].push_back({{"config", labels[k]}, {"columns", columns}, {"best", best}});
            }
            const nlohmann::json stats = {{"norm_threshold", a->rules.norm_threshold},
                                          {"mad_k", a->rules.mad_k},
                                          {"sink_alpha", a->rules.sink_alpha},
                                          {"layer", "all summary fields describe the last layer (the output)"},
                                          {"summary", json_summary},
                                          {"rows", json_rows}};

            render::Report report;
            report.title = "vitreg compare: " + std::to_string(configs.size()) + " configurations, " +
                           std::to_string(images.size()) + " images";
            report.summary =
                "Left of each pair: where the CLS token of the last layer looks (mean over heads). Right: the L2 norm of each "
                "patch token at the output, outlined where it exceeds median + k*MAD of that image. High-norm outliers that "
                "also draw attention are the artifacts registers, softmax-1 and sinks are meant to remove.";
            report.summary_configs = labels;
            report.summary_columns = summary;
            report.summary_note =
                "Mean \u00b1 sample standard deviation (n \u2212 1; 0 for one image) over the images of each statistic of the "
                "per-image table, at the last layer. Marked \u2605 (columns with \u2193): the lowest mean among the configurations "
                "of the artifact-related statistics, every one on a tie and none when all tie (norm_max_over_median, "
                "artifacts_abs, artifact_fraction_abs, artifacts_robust, artifact_fraction_robust, max_inf_norm, kurtosis, "
                "sink_rate, top_key_mass), where fewer high-norm outliers, lighter tails and less attention dumped on one key "
                "are what registers, softmax-1 and sinks aim for. norm_median, norm_max, robust_threshold, mean_abstention and "
                "cls_on_registers describe the model and are not ranked.";
            report.figures.push_back({"compare.png", render::png_bytes(grid)});
            for (const auto& [key, value] : rows.front()) report.table_header.push_back(key);
            for (const auto& r : rows) {
                std::vector<std::string> cellsv;
                for (const auto& kv : r) cellsv.push_back(kv.second);
                report.table_rows.push_back(cellsv);
            }
            report.plots.push_back({"max patch norm per layer (mean over images)", "L2 norm", max_norm});
            report.plots.push_back({"artifact fraction per layer (median + k*MAD rule)", "fraction", fraction});
            for (std::size_t k = 0; k < configs.size(); ++k) {
                float robust = 0;
                for (const auto& row : cells) robust = std::max(robust, row[k].stats.layers.back().robust_threshold);
                report.histograms.push_back(
                    {configs[k].label, render::png_bytes(render::histogram(output_norms[k], 40,
                                                                           {{robust, "max median+k*MAD"}, {a->rules.norm_threshold, "absolute"}},
                                                                           configs[k].label, "output patch norm"))});
            }

            make_dirs(a->out);
            const std::string dir = a->out + "/";
            render::write_png(dir + "compare.png", grid);
            write_file_atomic(dir + "stats.csv", csv);
            write_file_atomic(dir + "stats.json", stats.dump(1) + "\n");
            write_file_atomic(dir + "report.html", render::report_html(report));
            std::cout << summary_text(summary, labels, images.size()) << std::flush;
            std::cerr << "vitreg: compared " << configs.size() << " configurations on " << images.size() << " images: "
                      << a->out << "/{compare.png,stats.csv,stats.json,report.html}\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
