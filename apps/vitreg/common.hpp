#pragma once
// What the vitreg subcommands share: how a model is named on the command line and loaded.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "../pixel_args.hpp"
#include "vitreg/batch_job.hpp"
#include "vitreg/analysis/artifact_rule.hpp"
#include "vitreg/analysis/calibrate.hpp"
#include "vitreg/image.hpp"
#include "vitreg/labelled_model.hpp"
#include "vitreg/model.hpp"
#include "vitreg/model_options.hpp"
#include "vitreg/model_request.hpp"

namespace vitreg::cli {

// The subcommand to run once parsing succeeded; returns the exit status.
using Command = std::function<int()>;

// A model as the command line names it: MODEL and the values of the table's Open options
// (model_options()) as given, their defaults otherwise.
struct ModelArgs {
    std::string model;
    OptionValues options;

    ModelRequest request() const { return ModelRequest::from_options(model, options); }
};

// One option of the table (model_options()) on `cmd`, bound to `target`: its flag, help, choices
// or range, and the default --help shows.
template <class T>
CLI::Option* add_table_option(CLI::App& cmd, const std::string& name, T& target) {
    const ModelOption& o = model_option(name);
    CLI::Option* option = cmd.add_option("--" + o.name, target, o.help);
    if (!o.choices.empty()) option->check(CLI::IsMember(o.choices));
    if (o.kind == OptionKind::Integer) {
        if (o.choices.empty()) option->check(CLI::Range(o.min, o.max));
        option->type_name("INT");
    }
    if (!o.default_text.empty()) option->capture_default_str();
    return option;
}

// MODEL positional plus the table's Open options: --key, --attention, --pos-interp, the precision
// (--precision, --act-quant, --scales, --int8-weights), the interventions (--evict, --ttr,
// --register-neurons) and the checkpoint's limits.
void add_model_args(CLI::App& cmd, ModelArgs& args);
// The bounds on what one input image may cost: --max-image-pixels, --max-tokens.
struct InputLimits {
    ImageLimits image;
    std::int64_t max_tokens = kDefaultMaxTokens;
};
void add_input_limit_args(CLI::App& cmd, InputLimits& limits);


// What the commands that learn from a set of images take (calibrate-int8, calibrate-sink,
// find-register-neurons): MODEL --images IMAGE... -o OUT, the resize, threads and input limits.
struct CalibrationArgs {
    ModelArgs model;
    std::vector<std::string> images;
    std::string out;
    PixelArgs pixels;
    int threads = 0;
    InputLimits limits;
};
void add_calibration_args(CLI::App& cmd, CalibrationArgs& args, const std::string& out_help);
// What such a command runs: the loaded model, the expanded images, the options, and a progress
// bar on stderr to hand to the library call.
struct CalibrationRun {
    Model model;
    std::vector<std::string> images;
    CalibrationOptions options;
    std::function<void(std::size_t, std::size_t)> progress;
};
CalibrationRun start_calibration(const CalibrationArgs& args);

// The artifact rule of the commands that outline or count artifacts (compare, explore, maps,
// study): --artifact-rule norm|direction|both, --defects FILE (else the directions are computed
// from each model's weights), --defect-samples and --defect-seed for that computation.
void add_artifact_rule_args(CLI::App& cmd, ArtifactRule& rule);
// The defect directions' fit: --samples and --seed as `vitreg defects` states them.
void add_defect_fit_args(CLI::App& cmd, DefectOptions& fit, const std::string& prefix);

// What the batch jobs (extract, dense) take: MODEL INPUT... -o OUT, how to read and run the
// inputs, and how the job is made durable (--chunk, --resume, --overwrite) and split (--shard).
struct BatchArgs {
    ModelArgs model;
    std::vector<std::string> inputs;
    std::string out;
    PixelArgs pixels;
    GivenOptions given;  // of batch_option_table()
    int threads = 0;
    InputLimits limits;
    std::string shard;
    int shard_count = 0;
};
// `defaults`: the job's options struct as constructed (dense runs one image per forward).
void add_batch_args(CLI::App& cmd, BatchArgs& args, const BatchOptions& defaults = BatchOptions());
// The options every batch job shares (BatchOptions), from the command line, over `o`'s own defaults.
void fill_batch_options(const BatchArgs& a, BatchOptions& o);
// The expanded inputs (UsageError when there are none).
std::vector<std::string> batch_inputs(const BatchArgs& args);
// Says how the job went on stderr; the exit status: 0, or 3 when some inputs failed.
int report_batch(std::size_t ok, std::size_t failed, std::size_t inputs, const std::string& what, const std::string& out_dir);

// --quiet on every subcommand of `app`: what the commands say on stderr about their progress and
// results (summaries, the loader's notes, progress bars) is dropped; errors are still printed.
void add_quiet_flag(CLI::App& app);
// Where those informational lines go: stderr, or nowhere under --quiet. Errors go to std::cerr.
std::ostream& status_out();
// Whether progress may be drawn: stderr is a terminal or --progress was given, and --quiet was not.
bool progress_shown();

// A one-line progress bar on stderr, drawn only when progress_shown(), with images/s and, given
// a batch job's stage times (stage_sink), each stage's share of their busy time.
class ProgressBar {
public:
    ProgressBar();
    void operator()(std::size_t done, std::size_t total) const;
    // For BatchOptions::stage_progress: feeds this bar (and its copies) the stages' seconds.
    StageProgress stage_sink() const;

private:
    bool enabled_;
    bool lines_;  // stderr is no terminal: whole lines instead of one redrawn line
    std::chrono::steady_clock::time_point start_;
    std::shared_ptr<StageSeconds> stages_;
    std::shared_ptr<double> last_line_;  // seconds since start_ at the last line (copies share it)
};

// Whether freed blocks of a MB and more stay in the heap (true: the images' decode buffers are
// reused) or are unmapped on free (while weights load). main() sets true; load_model false while loading.
void keep_big_blocks_in_heap(bool keep);
// Resolves, loads and packs (open_model); prints the loader's notes (inferred heads, retrofits) to stderr.
Model load_model(const ModelRequest& request);
Model load_model(const ModelArgs& args);
// One configuration of the commands that show several side by side (compare, explore, serve):
// "MODEL[@KIND][@PRECISION][@evict=LIST][@ttr=K:NEURONS]" (ModelSpec), loaded, and its label.
using Configuration = LabelledModel;
Configuration load_configuration(const std::string& text);

void register_info(CLI::App& app, Command& run);
void register_extract(CLI::App& app, Command& run);
void register_bench(CLI::App& app, Command& run);
void register_maps(CLI::App& app, Command& run);
void register_dense(CLI::App& app, Command& run);
void register_linprobe(CLI::App& app, Command& run);
void register_merge(CLI::App& app, Command& run);
void register_compare(CLI::App& app, Command& run);
void register_calibrate(CLI::App& app, Command& run);
void register_calibrate_sink(CLI::App& app, Command& run);
void register_calibrate_bias(CLI::App& app, Command& run);
void register_find_register_neurons(CLI::App& app, Command& run);
void register_study(CLI::App& app, Command& run);
void register_defects(CLI::App& app, Command& run);
void register_convert(CLI::App& app, Command& run);
void register_explore(CLI::App& app, Command& run);
void register_serve(CLI::App& app, Command& run);
void register_eval(CLI::App& app, Command& run);
void register_index(CLI::App& app, Command& run);
void register_search(CLI::App& app, Command& run);

}  // namespace vitreg::cli
