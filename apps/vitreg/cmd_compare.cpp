// vitreg compare MODEL[@KIND]... --images IMAGE... -o OUT_DIR: the same images through several
// configurations, side by side: compare.png, stats.csv, stats.json and report.html.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common.hpp"
#include "vitreg/analysis/compare.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/render/report.hpp"
#include "vitreg/render/views.hpp"
#include "vitreg/analysis/inspect.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::cli {

namespace {

// compare.png: per configuration the last layer's CLS attention (mean of heads) and the output
// patch norms on one scale per configuration, artifacts outlined.
cv::Mat compare_grid(const CompareResult& r, const std::vector<std::vector<cv::Mat>>& inputs) {
    const std::size_t configs = r.configs.size();
    std::vector<float> norm_max(configs, 0.0f);
    for (const auto& row : r.cells)
        for (std::size_t k = 0; k < configs; ++k) norm_max[k] = std::max(norm_max[k], row[k].stats.layers.back().norm_max);
    std::vector<std::string> columns, row_labels;
    for (const auto& cfg : r.configs) {
        columns.push_back(cfg.label + "\nCLS attention");
        columns.push_back(cfg.label + "\npatch norms");
    }
    std::vector<std::vector<cv::Mat>> tiles;
    for (std::size_t i = 0; i < r.images.size(); ++i) {
        row_labels.push_back(r.images[i].substr(r.images[i].find_last_of('/') + 1));
        std::vector<cv::Mat> row;
        for (std::size_t k = 0; k < configs; ++k) {
            const CompareCell& cell = r.cells[i][k];
            const Trace& t = cell.inspection.trace;
            const int last = t.layers - 1;
            const auto rows = t.query_rows(t.attention_slot(last), 0, t.query_slot(0));
            row.push_back(render::attention_tile(inputs[i][k], fuse_heads(rows.data(), t.heads, t.tokens, HeadFusion::Mean).data(), t));
            cv::Mat norms = render::norms_tile(inputs[i][k], t.norms_of(last, 0), t, 0.0f, norm_max[k], cell.outlined());
            std::ostringstream cap;
            cap.precision(3);
            cap << "max " << cell.stats.layers.back().norm_max << ", " << cell.stats.layers.back().artifacts_flagged << " outlined";
            render::caption(norms, cap.str());
            row.push_back(norms);
        }
        tiles.push_back(std::move(row));
    }
    return render::labelled_grid(
        tiles, columns, row_labels,
        "last layer: CLS attention (mean of heads) | output patch norms (one scale per configuration; outlined: " +
            r.rules.rule.describe() + ")");
}

// report.html: the grid, the summary, the per-image table, per-layer plots and the histograms of
// the output patch norms.
render::Report compare_report(const CompareResult& r, const cv::Mat& grid) {
    const std::size_t configs = r.configs.size(), images = r.images.size();
    std::vector<render::ReportSeries> max_norm(configs), fraction(configs);
    std::vector<std::vector<float>> output_norms(configs);
    for (std::size_t k = 0; k < configs; ++k) {
        const int depth = r.configs[k].model.config().depth;
        max_norm[k] = {r.configs[k].label, std::vector<double>(depth, 0.0)};
        fraction[k] = {r.configs[k].label, std::vector<double>(depth, 0.0)};
    }
    for (const auto& image : r.cells)
        for (std::size_t k = 0; k < configs; ++k) {
            const CompareCell& cell = image[k];
            for (const auto& l : cell.stats.layers) {
                max_norm[k].values[l.layer] += l.norm_max / images;
                fraction[k].values[l.layer] += l.artifact_fraction_flagged / images;
            }
            const Trace& t = cell.inspection.trace;
            const auto out = render::patch_grid(t.norms_of(t.layers - 1, 0), t);
            output_norms[k].insert(output_norms[k].end(), out.begin(), out.end());
        }

    render::Report report;
    report.title = "vitreg compare: " + std::to_string(configs) + " configurations, " + std::to_string(images) + " images";
    report.summary =
        "Left of each pair: where the CLS token of the last layer looks (mean over heads). Right: the L2 norm of each "
        "patch token at the output, outlined where the artifact rule flags it (" + r.rules.rule.describe() +
        ", over that image's patches). High-norm outliers that also draw attention are the artifacts registers, "
        "softmax-1 and sinks are meant to remove.";
    for (const auto& cfg : r.configs) report.summary_configs.push_back(cfg.label);
    report.summary_columns = r.summary;
    report.summary_note =
        "Mean \u00b1 sample standard deviation (n \u2212 1; 0 for one image) over the images of each statistic of the "
        "per-image table, at the last layer. Marked \u2605 (columns with \u2193): the lowest mean among the configurations "
        "of the artifact-related statistics, every one on a tie and none when all tie (norm_max_over_median, "
        "artifacts_abs, artifact_fraction_abs, artifacts_robust, artifact_fraction_robust, artifacts_flagged, "
        "artifact_fraction_flagged, max_inf_norm, kurtosis, "
        "sink_rate, top_key_mass), where fewer high-norm outliers, lighter tails and less attention dumped on one key "
        "are what registers, softmax-1 and sinks aim for. norm_median, norm_max, robust_threshold, mean_abstention and "
        "cls_on_registers describe the model and are not ranked.";
    report.figures.push_back({"compare.png", render::png_bytes(grid)});
    for (const auto& [key, value] : r.cells.front().front().row) report.table_header.push_back(key);
    for (const auto& image : r.cells)
        for (const auto& cell : image) {
            std::vector<std::string> values;
            for (const auto& kv : cell.row) values.push_back(kv.second);
            report.table_rows.push_back(values);
        }
    report.plots.push_back({"max patch norm per layer (mean over images)", "L2 norm", max_norm});
    report.plots.push_back({"artifact fraction per layer (" + r.rules.rule.describe() + ")", "fraction", fraction});
    for (std::size_t k = 0; k < configs; ++k) {
        float robust = 0;
        for (const auto& image : r.cells) robust = std::max(robust, image[k].stats.layers.back().robust_threshold);
        report.histograms.push_back(
            {r.configs[k].label, render::png_bytes(render::histogram(output_norms[k], 40,
                                                                     {{robust, "max median+k*MAD"}, {r.rules.norm_threshold, "absolute"}},
                                                                     r.configs[k].label, "output patch norm"))});
    }
    return report;
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
                    "@fp32|@bf16|@int8|@int8=SCALES.json|@int4, e.g. MODEL@softmax1@int8")
        ->required();
    cmd->add_option("--images", a->images, "image files, folders or @list.txt")->required();
    cmd->add_option("-o,--out", a->out, "output folder")->required();
    add_pixel_args(*cmd, a->pixels, "eval | none | WxH | short:N | long:N");
    cmd->add_option("--norm-threshold", a->rules.norm_threshold, "absolute artifact threshold on token norms")->capture_default_str();
    cmd->add_option("--mad-k", a->rules.rule.mad_k, "model-free rule: norm (or |cos|) > median + k*MAD")->capture_default_str();
    add_artifact_rule_args(*cmd, a->rules.rule);
    cmd->add_option("--threads", a->threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
    cmd->callback([&run, a] {
        run = [a] {
            CompareOptions options;
            options.resize = pixel_spec(a->pixels);
            options.rules = a->rules;
            options.threads = a->threads;
            const auto images = expand_inputs(a->images);
            if (images.empty()) throw UsageError("no images given");
            std::vector<LabelledModel> configs;
            for (const auto& spec : a->models) configs.push_back(load_configuration(spec));

            // Everything is computed before anything is written: a bad image leaves no output.
            const CompareResult result = compare(configs, images, options);
            std::vector<std::vector<cv::Mat>> inputs(images.size());  // [image][configuration]: the model inputs, for display
            for (std::size_t i = 0; i < images.size(); ++i)
                for (std::size_t k = 0; k < configs.size(); ++k) {
                    const Config& c = configs[k].model.config();
                    inputs[i].push_back(render::fit(render::input_image(result.cells[i][k].inspection.pixels, c.mean, c.std), 224));
                }
            const cv::Mat grid = compare_grid(result, inputs);
            const render::Report report = compare_report(result, grid);

            make_dirs(a->out);
            const std::string dir = a->out + "/";
            render::write_png(dir + "compare.png", grid);
            write_file_atomic(dir + "stats.csv", stats_csv(result));
            write_file_atomic(dir + "stats.json", to_json(result).dump(1) + "\n");
            write_file_atomic(dir + "report.html", render::report_html(report));
            std::cout << summary_text(result) << std::flush;
            status_out() << "vitreg: compared " << configs.size() << " configurations on " << images.size() << " images: "
                      << a->out << "/{compare.png,stats.csv,stats.json,report.html}\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
