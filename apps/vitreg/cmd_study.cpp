// vitreg study CONFIG... --images IMAGE... -o OUT_DIR: the property table of softmax, registers,
// softmax-1 and sinks (docs/design.md, "The study's property table") measured on every
// configuration (docs/study.md): study.html, study.json and study.csv.
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "common.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "core/parse_number.hpp"
#include "vitreg/analysis/study.hpp"
#include "vitreg/render/study_report.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::cli {

namespace {

std::vector<int> parse_sizes(const std::string& text) {
    std::vector<int> sizes;
    if (text.empty()) return sizes;
    for (const auto& part : split(text, ',')) {
        const auto v = parse_integer(part, 1, 4096);
        if (!v) throw UsageError("--sizes: '" + part + "' is not a side length in pixels (1..4096)");
        sizes.push_back(static_cast<int>(*v));
    }
    return sizes;
}

// The property table on the terminal: one line per configuration.
void print_table(const nlohmann::json& study) {
    const auto num = [](const nlohmann::json& v, int precision = 3) {
        if (v.is_null()) return std::string("-");
        std::ostringstream os;
        os << std::setprecision(precision) << v.get<double>();
        return os.str();
    };
    std::cout << std::left << std::setw(34) << "configuration" << std::right << std::setw(7) << "dump" << std::setw(9)
              << "abstain" << std::setw(8) << "sum p" << std::setw(9) << "+params" << std::setw(8) << "ms" << std::setw(10)
              << "massive" << std::setw(10) << "int8 cos" << std::setw(10) << "evict snk" << std::setw(10) << "s1 retro"
              << std::setw(9) << "drift" << "\n";
    for (const auto& c : study["configs"]) {
        const auto& s = c["summary"];
        std::cout << std::left << std::setw(34) << s["name"].get<std::string>().substr(0, 33) << std::right << std::setw(7)
                  << num(s["heads_dump"], 2) << std::setw(9) << num(s["heads_abstain"], 2) << std::setw(8)
                  << num(s["weights_sum_mean"]) << std::setw(9) << s["parameters_added"].dump() << std::setw(8)
                  << num(s["ms_per_image"]) << std::setw(10) << num(s["massive_ratio"]) << std::setw(10)
                  << num(s["int8_per_token_cls_cosine"], 5) << std::setw(10) << num(s["evict_sink_cls_cosine"], 4)
                  << std::setw(10) << num(s["retrofit_softmax1_cls_cosine"], 4) << std::setw(9) << num(s["mass_drift"], 2)
                  << "\n";
    }
}

}  // namespace

void register_study(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("study", "the property table of softmax, registers, softmax-1 and sinks (how heads do "
                                            "nothing, sum of weights, cost, massive activations, int8, eviction, retrofit, "
                                            "mass vs keys) measured per configuration");
    struct Args {
        std::vector<std::string> models, images;
        std::string out, sizes, labels;
        PixelArgs pixels;
        StudyOptions options;
        SafetensorsLimits limits;
        InputLimits input;
    };
    auto a = std::make_shared<Args>();
    cmd->add_option("CONFIG", a->models, "configurations as in compare: MODEL[@softmax|@softmax1|@sink][@fp32|@bf16|@int8|@int4]"
                                         "[@evict=LIST][@ttr=K:NEURONS]")
        ->required();
    cmd->add_option("--images", a->images, "image files, folders or @list.txt (even-numbered calibrate, odd-numbered evaluate)")
        ->required();
    cmd->add_option("-o,--out", a->out, "output folder")->required();
    add_pixel_args(*cmd, a->pixels, "the main size: eval | none | WxH | short:N | long:N");
    cmd->add_option("--sizes", a->sizes, "square sides for mass against the number of keys, e.g. 112,224,448");
    cmd->add_option("--labels", a->labels, "JSON from image file name to label, to score the checkpoint's own head");
    cmd->add_option("--mad-k", a->options.rules.rule.mad_k, "artifact tokens: norm (or |cos|) > median + k*MAD")->capture_default_str();
    add_artifact_rule_args(*cmd, a->options.rules.rule);
    cmd->add_option("--sink-alpha", a->options.rules.sink_alpha, "a head dumps when a key receives mean attention above this")
        ->capture_default_str();
    cmd->add_option("--timing-images", a->options.timing_images, "images timed for ms/image (0: not timed)")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    add_table_option(*cmd, "threads", a->options.threads);
    add_input_limit_args(*cmd, a->input);
    cmd->callback([&run, a] {
        run = [a] {
            a->options.resize = pixel_spec(a->pixels);
            a->options.sizes = parse_sizes(a->sizes);
            a->options.labels = a->labels;
            a->options.max_tokens = a->input.max_tokens;
            const auto images = expand_inputs(a->images);
            if (images.empty()) throw UsageError("no images given");
            std::vector<StudyConfig> configs;
            for (const auto& text : a->models) configs.push_back(StudyConfig::parse(text, a->limits));

            // Everything is measured before anything is written: a bad image leaves no output.
            // Which configuration and stage is running, on one line of a terminal.
            const bool tty = progress_shown();
            const auto stage = [tty](const std::string& line) {
                if (tty) std::cerr << "\rvitreg: study: " << line << "\x1b[K" << std::flush;
            };
            const nlohmann::json study = run_study(configs, StudyImages::files(images, a->input.image), a->options, stage);
            if (tty) std::cerr << "\r\x1b[K";
            const std::string html = render::study_html(study);
            make_dirs(a->out);
            const std::string dir = a->out + "/";
            write_file_atomic(dir + "study.json", study.dump(1) + "\n");
            write_file_atomic(dir + "study.csv", study_csv(study));
            write_file_atomic(dir + "study.html", html);
            print_table(study);
            status_out() << "vitreg: studied " << configs.size() << " configurations on " << images.size()
                      << " images: " << a->out << "/{study.html,study.json,study.csv}\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
