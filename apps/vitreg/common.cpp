#include "common.hpp"

#include <unistd.h>

#include <iomanip>
#include <iostream>

#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/analysis/model_spec.hpp"
#include "vitreg/analysis/register_neurons.hpp"

namespace vitreg::cli {

void add_model_args(CLI::App& cmd, ModelArgs& args) {
    cmd.add_option("MODEL", args.model,
                   "a .safetensors or PyTorch (.pth/.pt/.bin) file, a folder with model.safetensors or pytorch_model.bin "
                   "(+ config.json), a shipped name, a Hugging Face id in the local cache ([hf:]ORG/NAME[@REV]) or a torch "
                   "hub name (dinov2_vits14_reg4)")
        ->required();
    cmd.add_option("--key", args.key,
                   "PyTorch files: the key path of the state dict, dotted (model, model.state_dict); default: the top "
                   "level, or the first of model, state_dict, teacher, module that holds tensors");
    cmd.add_option("--attention", args.attention, "run with another normalizer than trained (a retrofit)")
        ->check(CLI::IsMember({"softmax", "softmax1", "sink"}));
    cmd.add_option("--pos-interp", args.pos_interp, "position-embedding resampling (default: per checkpoint origin)")
        ->check(CLI::IsMember({"offset", "antialias", "size"}));
    cmd.add_option("--precision", args.precision,
                   "fp32, bf16 (bf16 GEMMs, fp32 accumulation) or int8 (W8A8 linears, bf16 attention)")
        ->check(CLI::IsMember({"fp32", "bf16", "int8"}))
        ->capture_default_str();
    cmd.add_option("--act-quant", args.act_quant,
                   "int8 activations: per-token (dynamic) or per-tensor (static, from --scales)")
        ->check(CLI::IsMember({"per-token", "per-tensor"}))
        ->capture_default_str();
    cmd.add_option("--scales", args.scales, "SCALES.json from vitreg calibrate-int8, for --act-quant per-tensor");
    cmd.add_option("--int8-weights", args.int8_weights,
                   "int8 weight bits: 8, or 7 (ONNX Runtime's reduce_range: on a CPU without VNNI, int8 then runs "
                   "vpmaddubsw exactly instead of an emulation)")
        ->check(CLI::IsMember({7, 8}))
        ->capture_default_str();
    cmd.add_option("--evict", args.evict,
                   "keys removed from every head's attention: sink, artifacts, registers, cls, reg:K, patch:R,C "
                   "(comma-separated; sink and artifacts are found per image by a first forward)");
    cmd.add_option("--ttr", args.ttr, "test-time registers: K zero tokens after the trained registers (needs --register-neurons)")
        ->check(CLI::Range(0, 64));
    cmd.add_option("--register-neurons", args.register_neurons,
                   "the MLP neurons whose maxima move to the test-time registers: neurons.json[:TOP] (vitreg "
                   "find-register-neurons) or LAYER:NEURON,...");
    cmd.add_option("--max-header-bytes", args.limits.max_header_bytes, "refuse checkpoints with a larger safetensors header")
        ->check(CLI::Range(std::uint64_t(8), std::uint64_t(100) << 20))
        ->capture_default_str();
    cmd.add_option("--max-json-depth", args.limits.max_json_depth, "refuse JSON (header, config.json) nested deeper")
        ->check(CLI::Range(2, 1000))
        ->capture_default_str();
}

void add_input_limit_args(CLI::App& cmd, InputLimits& limits) {
    cmd.add_option("--max-image-pixels", limits.image.max_pixels, "refuse images with more pixels (before decoding them)")
        ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40))
        ->capture_default_str();
    cmd.add_option("--max-tokens", limits.max_tokens, "refuse inputs that make more tokens than this (0 = no limit)")
        ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 31))
        ->capture_default_str();
}

void add_calibration_args(CLI::App& cmd, CalibrationArgs& a, const std::string& out_help) {
    add_model_args(cmd, a.model);
    cmd.add_option("--images", a.images, "images: files, folders (recursive, sorted) or @list.txt")->required();
    cmd.add_option("-o,--out", a.out, out_help)->required();
    add_pixel_args(cmd, a.pixels);
    cmd.add_option("--threads", a.threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
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

void add_batch_args(CLI::App& cmd, BatchArgs& a) {
    add_model_args(cmd, a.model);
    cmd.add_option("INPUT", a.inputs, "image files, folders (recursive, sorted) or @list.txt")->required();
    cmd.add_option("-o,--out", a.out, "output folder")->required();
    add_pixel_args(cmd, a.pixels);
    cmd.add_option("--format", a.format, "npy or safetensors")->check(CLI::IsMember({"npy", "safetensors"}))->capture_default_str();
    cmd.add_option("--batch", a.batch, "images per forward (same-size images share one)")->check(CLI::Range(1, 4096))->capture_default_str();
    cmd.add_option("--threads", a.threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024))->capture_default_str();
    add_input_limit_args(cmd, a.limits);
    cmd.add_flag("--resume", a.resume, "continue the run that OUT holds (or finish it); starts one if there is none");
    cmd.add_flag("--overwrite", a.overwrite, "replace what OUT holds when it is another run (vitreg's files only)");
    cmd.add_option("--chunk", a.chunk, "inputs per durable chunk: a killed run loses at most one")
        ->check(CLI::Range(std::size_t(1), std::size_t(1) << 20))
        ->capture_default_str();
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
    o.format = a.format == "npy" ? FeatureFormat::Npy : FeatureFormat::Safetensors;
    o.batch = a.batch;
    o.threads = a.threads;
    o.image_limits = a.limits.image;
    o.max_tokens = a.limits.max_tokens;
    o.chunk_rows = a.chunk;
    o.resume = a.resume;
    o.overwrite = a.overwrite;
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
    std::cerr << "vitreg: " << what << " of " << ok << " of " << inputs << " images written to " << out_dir << "\n";
    if (!failed) return 0;
    std::cerr << "vitreg: " << failed << " input" << (failed == 1 ? "" : "s") << " failed (reasons in " << out_dir
              << "/manifest.jsonl)\n";
    return 3;
}

ProgressBar::ProgressBar() : enabled_(::isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

void ProgressBar::operator()(std::size_t done, std::size_t total) const {
    if (!enabled_ || total == 0) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::cerr << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] " << done << "/" << total
              << "  " << std::fixed << std::setprecision(1) << (s > 0 ? done / s : 0.0) << " img/s" << std::flush;
    if (done == total) std::cerr << "\n";
}

PrecisionOptions precision_of(const ModelArgs& args) {
    PrecisionOptions p;
    p.precision = parse_precision(args.precision);
    p.act_quant = parse_act_quant(args.act_quant);
    p.scales = args.scales;
    p.int8_weight_bits = args.int8_weights;
    return p;
}

Intervention intervention_of(const ModelArgs& args) {
    Intervention i;
    if (!args.evict.empty()) i.evict = Eviction::parse(args.evict);
    i.test_time_registers = args.ttr;
    if (!args.register_neurons.empty()) i.register_neurons = parse_register_neurons(args.register_neurons);
    return i;
}

ConfigOverrides overrides_of(const ModelArgs& args) {
    ConfigOverrides o;
    o.limits = args.limits;
    o.state_dict_key = args.key;
    if (!args.attention.empty()) o.attention = parse_attention_kind(args.attention);
    if (!args.pos_interp.empty()) o.pos_interp = parse_pos_interp(args.pos_interp);
    return o;
}

Model load_model(const ModelArgs& args) {
    Model m = Model::load(resolve_model_path(args.model), overrides_of(args), precision_of(args));
    const Intervention edit = intervention_of(args);
    if (!edit.empty()) m = m.with(edit);
    for (const auto& note : m.config().notes) std::cerr << "vitreg: note: " << note << "\n";
    return m;
}

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
    c.label = spec.label();
    if (c.model.config().retrofit()) c.label += " (retrofit)";
    return c;
}

}  // namespace vitreg::cli
