// vitreg extract MODEL INPUT... -o OUT_DIR: batch feature extraction.
#include <iostream>

#include "common.hpp"
#include "vitreg/extract.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"

namespace vitreg::cli {

void register_extract(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("extract", "write CLS / pooled / register (/ patch) features of images");
    struct Args {
        ModelArgs model;
        std::vector<std::string> inputs;
        std::string out, resize = "eval", format = "npy";
        bool patch_tokens = false;
        int batch = 8, threads = 0;
    };
    auto a = std::make_shared<Args>();
    add_model_args(*cmd, a->model);
    cmd->add_option("INPUT", a->inputs, "image files, folders (recursive, sorted) or @list.txt")->required();
    cmd->add_option("-o,--out", a->out, "output folder")->required();
    cmd->add_option("--resize", a->resize, "eval | none | WxH | short:N | long:N")->capture_default_str();
    cmd->add_flag("--patch-tokens", a->patch_tokens, "also write patch/<row> [h, w, D] per image");
    cmd->add_option("--format", a->format, "npy or safetensors")->check(CLI::IsMember({"npy", "safetensors"}))->capture_default_str();
    cmd->add_option("--batch", a->batch, "images per forward")->check(CLI::Range(1, 4096))->capture_default_str();
    cmd->add_option("--threads", a->threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024))->capture_default_str();
    cmd->callback([&run, a] {
        run = [a] {
            ExtractOptions o;
            o.out_dir = a->out;
            o.resize = ResizeSpec::parse(a->resize);
            o.patch_tokens = a->patch_tokens;
            o.format = a->format == "npy" ? FeatureFormat::Npy : FeatureFormat::Safetensors;
            o.batch = a->batch;
            o.threads = a->threads;
            const auto inputs = expand_inputs(a->inputs);
            if (inputs.empty()) throw UsageError("no input images found");
            const Model m = load_model(a->model);
            const ProgressBar bar;
            const auto s = extract_features(m, inputs, o, bar);
            std::cerr << "vitreg: " << s.ok << " of " << s.inputs << " images extracted into " << o.out_dir << "\n";
            if (s.failed) {
                std::cerr << "vitreg: " << s.failed << " input" << (s.failed == 1 ? "" : "s")
                          << " failed (reasons in " << o.out_dir << "/manifest.jsonl)\n";
                return 3;
            }
            return 0;
        };
    });
}

}  // namespace vitreg::cli
