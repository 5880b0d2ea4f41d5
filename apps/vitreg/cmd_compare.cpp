// vitreg compare MODEL[@KIND]... --images IMAGE... -o OUT_DIR: the same images through several
// configurations, side by side: compare.png, stats.csv, stats.json and report.html.
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/inspect.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/report.hpp"
#include "vitreg/views.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::cli {

namespace {

struct Configuration {
    std::string label;
    Model model;
};

// "MODEL[@KIND][@PRECISION][@evict=LIST][@ttr=K:NEURONS]" (ModelSpec).
Configuration load_configuration(const std::string& text) {
    const ModelSpec spec = ModelSpec::parse(text);
    ModelArgs args;
    args.model = spec.model;
    if (spec.attention) args.attention = to_string(*spec.attention);
    if (spec.precision) {
        args.precision = to_string(spec.precision->precision);
        args.act_quant = to_string(spec.precision->act_quant);
        args.scales = spec.precision->scales;
    }
    Configuration c{"", load_model(args)};
    if (spec.intervention) c.model = c.model.with(*spec.intervention);
    std::string stem = args.model.substr(args.model.find_last_of('/') + 1);
    if (stem.size() > 12 && stem.compare(stem.size() - 12, 12, ".safetensors") == 0) stem.resize(stem.size() - 12);
    c.label = stem + spec.suffix;
    if (c.model.config().retrofit()) c.label += " (retrofit)";
    return c;
}

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
        std::string out, resize = "eval";
        ArtifactRules rules;
        int threads = 0;
    };
    auto a = std::make_shared<Args>();
    cmd->add_option("MODEL", a->models, "checkpoints (file, folder or shipped name), each optionally @softmax|@softmax1|@sink and "
                    "@fp32|@bf16|@int8|@int8=SCALES.json, e.g. MODEL@softmax1@int8")
        ->required();
    cmd->add_option("--images", a->images, "image files, folders or @list.txt")->required();
    cmd->add_option("-o,--out", a->out, "output folder")->required();
    cmd->add_option("--resize", a->resize, "eval | none | WxH | short:N | long:N")->capture_default_str();
    cmd->add_option("--norm-threshold", a->rules.norm_threshold, "absolute artifact threshold on token norms")->capture_default_str();
    cmd->add_option("--mad-k", a->rules.mad_k, "model-free rule: norm > median + k*MAD")->capture_default_str();
    cmd->add_option("--threads", a->threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
    cmd->callback([&run, a] {
        run = [a] {
            const ResizeSpec resize = ResizeSpec::parse(a->resize);
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
            const nlohmann::json stats = {{"norm_threshold", a->rules.norm_threshold},
                                          {"mad_k", a->rules.mad_k},
                                          {"sink_alpha", a->rules.sink_alpha},
                                          {"layer", "all summary fields describe the last layer (the output)"},
                                          {"rows", json_rows}};

            render::Report report;
            report.title = "vitreg compare: " + std::to_string(configs.size()) + " configurations, " +
                           std::to_string(images.size()) + " images";
            report.summary =
                "Left of each pair: where the CLS token of the last layer looks (mean over heads). Right: the L2 norm of each "
                "patch token at the output, outlined where it exceeds median + k*MAD of that image. High-norm outliers that "
                "also draw attention are the artifacts registers, softmax-1 and sinks are meant to remove.";
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
            std::cerr << "vitreg: compared " << configs.size() << " configurations on " << images.size() << " images: "
                      << a->out << "/{compare.png,stats.csv,stats.json,report.html}\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
