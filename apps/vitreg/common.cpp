#include "common.hpp"

#include <malloc.h>
#include <unistd.h>

#include <iomanip>
#include <iostream>

#include "vitreg/batch_options.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/model_spec.hpp"

namespace vitreg::cli {

namespace {
bool quiet = false;
bool progress_forced = false;  // --progress: the progress line also when stderr is a file or pipe
}  // namespace

void add_quiet_flag(CLI::App& app) {
    for (CLI::App* cmd : app.get_subcommands({}))
        cmd->add_flag("--quiet,-q", quiet, "print no progress, summaries or notes on stderr (errors are still printed)");
}

std::ostream& status_out() {
    static std::ostream nowhere(nullptr);  // no buffer: every write is dropped
    return quiet ? nowhere : std::cerr;
}

bool progress_shown() { return !quiet && (progress_forced || ::isatty(STDERR_FILENO) != 0); }

void add_model_args(CLI::App& cmd, ModelArgs& args) {
    cmd.add_option("MODEL", args.model, model_name_help())->required();
    for (const ModelOption& o : model_options()) {
        if (o.group != OptionGroup::Open) continue;
        // Left empty unless given, so that a default never overrides the model name's own suffix
        // (MODEL@int8 with no --precision runs int8); --help still shows the default.
        CLI::Option* option = add_table_option(cmd, o.name, args.options[o.name]);
        if (!o.default_text.empty()) option->default_str(o.default_text);
    }
}

void add_input_limit_args(CLI::App& cmd, InputLimits& limits) {
    add_table_option(cmd, "max-image-pixels", limits.image.max_pixels);
    add_table_option(cmd, "max-tokens", limits.max_tokens);
}

void add_calibration_args(CLI::App& cmd, CalibrationArgs& a, const std::string& out_help) {
    add_model_args(cmd, a.model);
    cmd.add_option("--images", a.images, "images: files, folders (recursive, sorted) or @list.txt")->required();
    cmd.add_option("-o,--out", a.out, out_help)->required();
    add_pixel_args(cmd, a.pixels);
    add_table_option(cmd, "threads", a.threads);
    add_input_limit_args(cmd, a.limits);
}

CalibrationRun start_calibration(const CalibrationArgs& a) {
    CalibrationRun r{load_model(a.model), expand_inputs(a.images), {}, {}};
    r.options.resize = pixel_spec(a.pixels);
    r.options.image_limits = a.limits.image;
    r.options.max_tokens = a.limits.max_tokens;
    r.options.threads = a.threads;
    r.progress = [bar = ProgressBar()](std::size_t done, std::size_t total) { bar(done, total); };
    return r;
}

void add_defect_fit_args(CLI::App& cmd, DefectOptions& fit, const std::string& prefix) {
    cmd.add_option("--" + prefix + "samples", fit.samples,
                   "rows of the seeded Gaussian sample x ~ N(0, I) the MLP's least-squares linearization is fitted on")
        ->check(CLI::Range(1, 1 << 24))
        ->capture_default_str();
    cmd.add_option("--" + prefix + "seed", fit.seed, "seed of that sample (SplitMix64, Box-Muller)")->capture_default_str();
}

void add_artifact_rule_args(CLI::App& cmd, ArtifactRule& rule) {
    cmd.add_option_function<std::string>(
           "--artifact-rule", [&rule](const std::string& name) { rule.test = parse_enum<ArtifactTest>(name); },
           "which patches are artifacts (outlined, counted): norm (norm an outlier among the image's patches), "
           "direction (|cos| with the layer's defect direction an outlier), both")
        ->check(CLI::IsMember(enum_names<ArtifactTest>()))
        ->default_str(name_of(rule.test));
    cmd.add_option("--defects", rule.defects_file,
                   "defect directions written by vitreg defects (default: computed from each model's weights)");
    add_defect_fit_args(cmd, rule.fit, "defect-");
}

void add_batch_args(CLI::App& cmd, BatchArgs& a, const BatchOptions& defaults) {
    add_model_args(cmd, a.model);
    cmd.add_option("INPUT", a.inputs,
                   "image files, folders (recursive, sorted), @list.txt, or webdataset shards (.tar, .tar.gz, "
                   ".tar.zst, '{00000..00099}.tar')")
        ->required();
    cmd.add_option("-o,--out", a.out, "output folder")->required();
    cmd.add_flag("--progress", progress_forced,
                 "print the progress line (images/s, each stage's share) also when stderr is not a terminal: "
                 "a line a second, for logs");
    add_pixel_args(cmd, a.pixels);
    add_table_options(cmd, batch_option_table(), defaults, a.given);
    add_table_option(cmd, "threads", a.threads);
    add_input_limit_args(cmd, a.limits);
    cmd.add_option("--shard", a.shard,
                   "K/N: take block K (0-based) of N of the sorted inputs, into OUT/shard-K-of-N; 'auto' reads "
                   "SLURM_ARRAY_TASK_ID/COUNT or JOB_COMPLETION_INDEX (with --shard-count); join with vitreg merge OUT");
    cmd.add_option("--shard-count", a.shard_count,
                   "N for --shard auto: needed with JOB_COMPLETION_INDEX (Kubernetes) and when resubmitting single "
                   "Slurm array tasks")
        ->check(CLI::Range(1, 1 << 20));
}

void fill_batch_options(const BatchArgs& a, BatchOptions& o) {
    o.out_dir = a.out;
    o.resize = pixel_spec(a.pixels);
    apply_given(batch_option_table(), a.given, o);
    o.threads = a.threads;
    o.image_limits = a.limits.image;
    o.max_tokens = a.limits.max_tokens;
    if (!a.shard.empty()) {
        const Shard s = parse_shard(a.shard, a.shard_count);
        o.shard_index = s.index;
        o.shard_count = s.count;
    }
}

std::vector<std::string> batch_inputs(const BatchArgs& a) {
    auto inputs = expand_inputs(a.inputs);
    if (inputs.empty()) throw UsageError("no input images found");
    return inputs;
}

int report_batch(std::size_t ok, std::size_t failed, std::size_t inputs, const std::string& what, const std::string& out_dir) {
    status_out() << "vitreg: " << what << " of " << ok << " of " << inputs << " images written to " << out_dir << "\n";
    if (!failed) return 0;
    std::cerr << "vitreg: " << failed << " input" << (failed == 1 ? "" : "s") << " failed (reasons in " << out_dir
              << "/manifest.jsonl)\n";
    return 3;
}

ProgressBar::ProgressBar()
    : enabled_(progress_shown()),
      lines_(::isatty(STDERR_FILENO) == 0),
      start_(std::chrono::steady_clock::now()),
      stages_(std::make_shared<StageSeconds>()),
      last_line_(std::make_shared<double>(-1)) {
    if (progress_forced && quiet) throw UsageError("--progress and --quiet contradict each other: give one of them");
}

StageProgress ProgressBar::stage_sink() const {
    return [stages = stages_](const StageSeconds& s) { *stages = s; };
}

void ProgressBar::operator()(std::size_t done, std::size_t total) const {
    if (!enabled_ || total == 0) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    // Into a log: whole lines, at most one a second, and the last.
    if (lines_ && done != total && s - *last_line_ < 1) return;
    *last_line_ = s;
    std::cerr << (lines_ ? "" : "\r") << "[" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] "
              << done << "/" << total << "  " << std::fixed << std::setprecision(1) << (s > 0 ? done / s : 0.0)
              << " img/s";
    const StageSeconds& t = *stages_;
    if (const double busy = t.read + t.decode + t.forward; busy > 0)
        std::cerr << std::setprecision(0) << "  read " << 100 * t.read / busy << "% decode " << 100 * t.decode / busy
                  << "% forward " << 100 * t.forward / busy << "% (of the wall time " << 100 * t.forward / s << "%)";
    if (lines_ || done == total) std::cerr << "\n";
    std::cerr << std::flush;
}

void keep_big_blocks_in_heap(bool keep) {
    // A camera photo decodes into a buffer of tens of MB. glibc serves blocks over 32 MB with a
    // fresh mmap and unmaps them on free, so every image paid its pages' faults again (a fifth
    // of a 12 MP photo's decode and resize). Kept in the heap, the next image reuses them.
    // While weights load, blocks of a MB and more are mapped apart instead and unmapped on free:
    // a weight's fp32 copy, freed once packed, would otherwise stay resident under the packed
    // weights after it (@bf16 and @int8 loads peaked at fp32's size).
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, keep ? 1 << 30 : 1 << 20);
    mallopt(M_TRIM_THRESHOLD, keep ? 1 << 30 : 1 << 20);
#endif
}

Model load_model(const ModelRequest& request) {
    // Big blocks go back to the system while the weights load, and stay in the heap after (images).
    struct Loading {
        Loading() { keep_big_blocks_in_heap(false); }
        ~Loading() { keep_big_blocks_in_heap(true); }
    } loading;
    Model m = open_model(request);
    for (const auto& note : m.config().notes) status_out() << "vitreg: note: " << note << "\n";
    return m;
}

Model load_model(const ModelArgs& args) { return load_model(args.request()); }

Configuration load_configuration(const std::string& text) {
    const ModelSpec spec = ModelSpec::parse(text);
    Configuration c{spec.label(), load_model(ModelRequest::from_spec(spec))};
    if (c.model.config().retrofit()) c.label += " (retrofit)";
    return c;
}

}  // namespace vitreg::cli
