// vitreg eval correspondence|segmentation|knn MODEL... -o OUT_DIR: dense quality of several
// configurations on one data set, side by side: eval.json, eval.csv and report.html (plus, for
// correspondence, a picture of each pair's matches).
#include <iostream>
#include <sstream>

#include "common.hpp"
#include "vitreg/analysis/evaluation.hpp"
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
};

CLI::App* add_eval_command(CLI::App& parent, const std::string& name, const std::string& help, EvalArgs& a,
                           const std::string& default_resize) {
    auto* cmd = parent.add_subcommand(name, help);
    cmd->add_option("MODEL", a.models, "configurations side by side: MODEL[@KIND][@PRECISION][@evict=…][@ttr=…] (as compare takes them)")
        ->required();
    cmd->add_option("-o,--out", a.out, "output folder: eval.json, eval.csv, report.html")->required();
    a.pixels.resize = default_resize;
    add_pixel_args(*cmd, a.pixels, "eval | none | WxH | short:N | long:N");
    add_table_option(*cmd, "threads", a.threads);
    return cmd;
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
                                 "long:448");
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
    auto o = std::make_shared<SegmentationOptions>();
    auto dirs = std::make_shared<std::pair<std::string, std::string>>();
    auto* cmd = add_eval_command(eval, "segmentation", "mIoU of a dense k-NN (Hummingbird) and of a linear probe on patch features", *a,
                                 "long:448");
    cmd->add_option("--images", dirs->first, "folder of images (VOC's JPEGImages)")->required();
    cmd->add_option("--masks", dirs->second, "folder of <image stem>.png label masks: palette or greyscale, 255 ignored (VOC's SegmentationClass)")
        ->required();
    cmd->add_option("--train-fraction", o->train_fraction, "the first part of the images sorted by name learns, the rest is scored")
        ->check(CLI::Range(0.05, 0.95))
        ->capture_default_str();
    cmd->add_option("--k", o->knn.vote.k, "neighbours of the dense k-NN")->check(CLI::Range(1, 1000))->capture_default_str();
    cmd->add_option("--temperature", o->knn.vote.temperature, "each neighbour votes exp(cos / temperature)")
        ->check(CLI::Range(1e-4, 10.0))
        ->capture_default_str();
    cmd->add_option("--memory-per-image", o->knn.memory_per_image, "labelled patches drawn from each training image into the memory")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--max-memory", o->knn.max_memory, "the memory's bound in patches (refused beyond)")->capture_default_str();
    cmd->add_option("--seed", o->knn.seed, "the memory's draw")->capture_default_str();
    cmd->add_option("--ridge", o->ridge, "the linear probe's ridge strength")->check(CLI::Range(0.0, 1e6))->capture_default_str();
    cmd->callback([&run, a, o, dirs] {
        run = [a, o, dirs] {
            o->resize = pixel_spec(a->pixels);
            o->threads = a->threads;
            write_eval(a->out, evaluate_segmentation(load_configurations(a->models), dirs->first, dirs->second, *o), {});
            return 0;
        };
    });
}

void register_knn(CLI::App& eval, Command& run) {
    auto a = std::make_shared<EvalArgs>();
    auto o = std::make_shared<KnnOptions>();
    auto dir = std::make_shared<std::string>();
    auto* cmd = add_eval_command(eval, "knn", "leave-one-out k-NN accuracy on image features over class subfolders", *a, "eval");
    cmd->add_option("--images", *dir, "folder with one subfolder of images per class")->required();
    cmd->add_option("--feature", o->feature, "cls | pooled")->check(CLI::IsMember({"cls", "pooled"}))->capture_default_str();
    cmd->add_option("--k", o->vote.k, "neighbours")->check(CLI::Range(1, 1000))->capture_default_str();
    cmd->add_option("--temperature", o->vote.temperature, "each neighbour votes exp(cos / temperature)")
        ->check(CLI::Range(1e-4, 10.0))
        ->capture_default_str();
    cmd->callback([&run, a, o, dir] {
        run = [a, o, dir] {
            o->resize = pixel_spec(a->pixels);
            o->threads = a->threads;
            write_eval(a->out, evaluate_knn(load_configurations(a->models), *dir, *o), {});
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
