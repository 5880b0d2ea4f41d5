// vitreg eval correspondence|segmentation|knn MODEL... -o OUT_DIR: dense quality of several
// configurations on one data set, side by side: eval.json, eval.csv and report.html (plus, for
// correspondence, a picture of each pair's matches).
#include <iostream>
#include <sstream>

#include "common.hpp"
#include "vitreg/analysis/eval_options.hpp"
#include "vitreg/error.hpp"
#include "vitreg/render/eval_report.hpp"
#include "vitreg/render/render.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::cli {

namespace {

// What every evaluation takes: the configurations, the output folder, the pixels and threads.
struct EvalArgs {
    std::vector<std::string> models;
    std::string out;
    PixelArgs pixels;
    int threads = 0;
    GivenOptions given;  // of the evaluation's own option table
};

// `defaults`: the evaluation's options as constructed (its --resize default).
CLI::App* add_eval_command(CLI::App& parent, const std::string& name, const std::string& help, EvalArgs& a,
                           const EvalOptions& defaults) {
    auto* cmd = parent.add_subcommand(name, help);
    cmd->add_option("MODEL", a.models, "configurations side by side: MODEL[@KIND][@PRECISION][@evict=…][@ttr=…] (as compare takes them)")
        ->required();
    cmd->add_option("-o,--out", a.out, "output folder: eval.json, eval.csv, report.html")->required();
    a.pixels.defaults = defaults.resize;
    add_pixel_args(*cmd, a.pixels);
    add_table_option(*cmd, "threads", a.threads);
    return cmd;
}

// The evaluation's options as given: its table's over the struct's defaults, then pixels and threads.
template <class O, std::size_t N>
O eval_options(const EvalArgs& a, const OptionTable<O, N>& table) {
    O o;
    apply_given(table, a.given, o);
    o.resize = pixel_spec(a.pixels);
    o.threads = a.threads;
    return o;
}

std::vector<LabelledModel> load_configurations(const std::vector<std::string>& specs) {
    std::vector<LabelledModel> configs;
    for (const auto& spec : specs) configs.push_back(load_configuration(spec));
    return configs;
}

// Writes the table, its page and the figures; everything was computed before.
void write_eval(const std::string& out, const EvalTable& table, const std::vector<std::pair<std::string, cv::Mat>>& pictures) {
    std::vector<render::ReportFigure> figures;
    for (const auto& [name, picture] : pictures) figures.push_back({name, render::png_bytes(picture)});
    const std::string html = render::eval_report_html(table, figures);
    make_dirs(out);
    for (std::size_t i = 0; i < pictures.size(); ++i) write_file_atomic(out + "/" + pictures[i].first, figures[i].png);
    write_file_atomic(out + "/eval.json", to_json(table).dump(1) + "\n");
    write_file_atomic(out + "/eval.csv", eval_csv(table));
    write_file_atomic(out + "/report.html", html);
    std::cout << eval_csv(table) << std::flush;
    status_out() << "vitreg: eval " << table.task << " of " << table.configs.size() << " configurations: " << out
              << "/{eval.json,eval.csv,report.html}\n";
}

void register_correspondence(CLI::App& eval, Command& run) {
    auto a = std::make_shared<EvalArgs>();
    auto pairs = std::make_shared<std::vector<std::string>>();
    auto alphas = std::make_shared<std::vector<double>>(std::vector<double>{0.05, 0.10, 0.15});
    auto* cmd = add_eval_command(eval, "correspondence", "PCK of mutual nearest neighbours between two views with known geometry", *a,
                                 CorrespondenceOptions());
    cmd->add_option("--pair", *pairs,
                    "FIRST SECOND TRUTH: two views and their geometry (a homography as OpenCV XML or 9 numbers of text, or a "
                    "disparity map of the first view: greyscale PNG or .npz); repeatable")
        ->expected(3)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->required();
    cmd->add_option("--alphas", *alphas, "PCK thresholds as fractions of max(H, W)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
    cmd->callback([&run, a, pairs, alphas] {
        run = [a, pairs, alphas] {
            CorrespondenceOptions o;
            o.resize = pixel_spec(a->pixels);
            o.threads = a->threads;
            o.alphas = *alphas;
            std::vector<CorrespondencePair> list;
            for (std::size_t i = 0; i + 2 < pairs->size(); i += 3) list.push_back({(*pairs)[i], (*pairs)[i + 1], (*pairs)[i + 2]});
            const CorrespondenceEval r = evaluate_correspondence(load_configurations(a->models), list, o);
            std::vector<std::pair<std::string, cv::Mat>> pictures;
            const double alpha = o.alphas[o.alphas.size() / 2];
            for (std::size_t k = 0; k < r.scores.size(); ++k)
                for (std::size_t i = 0; i < list.size(); ++i) {
                    cv::Mat picture = render::matches_picture(list[i].first, list[i].second, r.scores[k][i], alpha);
                    std::ostringstream cap;
                    cap << r.table.configs[k] << ": " << r.scores[k][i].matches << " matches, green within " << alpha << " max(H, W)";
                    render::caption(picture, cap.str());
                    pictures.emplace_back("matches-" + std::to_string(k + 1) + "-" + std::to_string(i + 1) + ".png", picture);
                }
            write_eval(a->out, r.table, pictures);
            return 0;
        };
    });
}

void register_segmentation(CLI::App& eval, Command& run) {
    auto a = std::make_shared<EvalArgs>();
    auto dirs = std::make_shared<std::pair<std::string, std::string>>();
    const SegmentationOptions defaults;
    auto* cmd = add_eval_command(eval, "segmentation", "mIoU of a dense k-NN (Hummingbird) and of a linear probe on patch features", *a,
                                 defaults);
    cmd->add_option("--images", dirs->first, "folder of images (VOC's JPEGImages)")->required();
    cmd->add_option("--masks", dirs->second, "folder of <image stem>.png label masks: palette or greyscale, 255 ignored (VOC's SegmentationClass)")
        ->required();
    add_table_options(*cmd, segmentation_option_table(), defaults, a->given);
    cmd->callback([&run, a, dirs] {
        run = [a, dirs] {
            const auto o = eval_options(*a, segmentation_option_table());
            write_eval(a->out, evaluate_segmentation(load_configurations(a->models), dirs->first, dirs->second, o), {});
            return 0;
        };
    });
}

void register_knn(CLI::App& eval, Command& run) {
    auto a = std::make_shared<EvalArgs>();
    auto dir = std::make_shared<std::string>();
    const KnnOptions defaults;
    auto* cmd = add_eval_command(eval, "knn", "leave-one-out k-NN accuracy on image features over class subfolders", *a, defaults);
    cmd->add_option("--images", *dir, "folder with one subfolder of images per class")->required();
    add_table_options(*cmd, knn_option_table(), defaults, a->given);
    cmd->callback([&run, a, dir] {
        run = [a, dir] {
            write_eval(a->out, evaluate_knn(load_configurations(a->models), *dir, eval_options(*a, knn_option_table())), {});
            return 0;
        };
    });
}

}  // namespace

void register_eval(CLI::App& app, Command& run) {
    auto* eval = app.add_subcommand("eval", "dense quality, training-free: correspondence, segmentation, k-NN; several configurations in one table");
    eval->require_subcommand(1);
    register_correspondence(*eval, run);
    register_segmentation(*eval, run);
    register_knn(*eval, run);
}

}  // namespace vitreg::cli
