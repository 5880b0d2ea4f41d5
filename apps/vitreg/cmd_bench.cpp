// vitreg bench MODEL: forward latency and throughput on random input.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/resource.h>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/forward_memory.hpp"
#include "vitreg/inputs.hpp"
#include "core/peak.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg::cli {

namespace {

// The four linear layers of a block, timed alone on one thread through one precision's kernels.
struct LinearTimes {
    PrecisionOptions options;
    std::string kernel, unit;  // unit: GFLOP/s, or GOP/s for int8 and int4
    int rows = 0;
    std::vector<std::pair<std::string, double>> layers;  // qkv, proj, fc1, fc2
    double all = 0;                                       // the four together
    double instruction_peak = 0;                          // 0: none measured for the kernel
};

// The measured per-core peak, the model's linear layers alone on one thread against the peak
// of the width the kernels run (and, for a reduced precision, on its own kernels against the
// instruction they run), and the whole forward against threads × the peak its linears run at.
struct PeakReport {
    CorePeak core;
    std::vector<LinearTimes> linears;
    int threads_used = 0;
    double forward_fraction = 0;  // of threads_used × the fp32 width's peak, or the reduced precision's instruction's
};

LinearTimes time_linears(const Config& c, int rows, const PrecisionOptions& precision) {
    LinearTimes t;
    t.options = precision;
    t.unit = precision.precision == Precision::Int8 || precision.precision == Precision::Int4 ? "GOP/s" : "GFLOP/s";
    t.rows = rows;
    const int hidden = c.mlp_hidden;
    struct Shape {
        const char* name;
        int in, out;
    };
    const Shape shapes[] = {{"qkv", c.dim, 3 * c.dim}, {"proj", c.dim, c.dim}, {"fc1", c.dim, c.mlp == MlpKind::SwiGlu ? 2 * hidden : hidden},
                            {"fc2", hidden, c.dim}};
    double ops = 0, seconds = 0;
    for (const Shape& s : shapes) {
        const double g = linear_gflops(rows, s.in, s.out, precision);
        const double f = 2.0 * rows * s.in * s.out;
        ops += f;
        seconds += f / (g * 1e9);
        t.layers.emplace_back(s.name, g);
    }
    t.all = ops / seconds / 1e9;
    return t;
}

PeakReport measure_peak(const Model& m, int batch, int h, int w, int threads, double forward_gflops) {
    PeakReport r;
    r.core = measure_core_peak();
    if (!(r.core.kernel_peak > 0)) return r;
    const Config& c = m.config();
    const int rows = batch * (c.prefix_tokens() + c.registers + (h / c.patch) * (w / c.patch));
    r.linears.push_back(time_linears(c, rows, PrecisionOptions{}));
    if (m.precision().precision != Precision::Fp32) r.linears.push_back(time_linears(c, rows, m.precision()));
    r.core = higher(r.core, measure_core_peak());  // (peak.hpp: the clock may have been low at first)
    for (LinearTimes& t : r.linears) t.instruction_peak = precision_peak(r.core, t.options, &t.kernel);
    const double peak = m.precision().precision == Precision::Fp32 ? r.core.kernel_peak : r.linears.back().instruction_peak;
    if (!(peak > 0)) return r;  // a reduced precision emulated: no instruction of its own
    r.threads_used = threads ? threads : static_cast<int>(std::thread::hardware_concurrency());
    r.forward_fraction = forward_gflops / (r.threads_used * peak);
    return r;
}

void print_peak(const PeakReport& r, const Model& m) {
    const CorePeak& peak = r.core;
    std::cout << std::fixed << std::setprecision(1) << "peak per core: fp32 FMA " << peak.fma256 << " GFLOP/s (256-bit)";
    if (peak.fma512 > 0) std::cout << ", " << peak.fma512 << " GFLOP/s (512-bit)";
    if (peak.bf16 > 0) std::cout << "; bf16 vdpbf16ps " << peak.bf16 << " GFLOP/s";
    if (peak.int8 > 0) std::cout << "; int8 " << peak.int8 << " GOP/s (" << peak.int8_instruction << ")";
    if (peak.int8_256 > 0 && peak.int8_256 != peak.int8) std::cout << ", " << peak.int8_256 << " GOP/s (vpdpbusd (256-bit))";
    if (peak.int16 > 0) std::cout << "; int16 " << peak.int16 << " GOP/s (" << peak.int16_instruction << ")";
    if (peak.amx_int8 > 0) std::cout << "; AMX int8 " << peak.amx_int8 << " GOP/s (tdpbusd)";
    if (peak.amx_bf16 > 0) std::cout << "; AMX bf16 " << peak.amx_bf16 << " GFLOP/s (tdpbf16ps)";
    std::cout << "\n";
    for (const LinearTimes& t : r.linears) {
        const double own = t.instruction_peak;
        std::cout << std::setprecision(1) << "linear layers, " << to_string(t.options.precision) << ", 1 thread, "
                  << t.rows << " rows (kernels " << t.kernel << "):";
        for (const auto& [name, g] : t.layers) {
            std::cout << " " << name << " " << g << " " << t.unit;
            if (own > 0) std::cout << " (" << std::setprecision(0) << 100 * g / own << "%)" << std::setprecision(1);
        }
        std::cout << "; all four " << t.all << " " << t.unit;
        if (own > 0)
            std::cout << " = " << std::setprecision(0) << 100 * t.all / own
                      << (t.options.precision == Precision::Fp32 ? "% of the peak of their width"
                                                                 : "% of its instruction's peak");
        std::cout << "\n";
    }
    if (r.linears.empty()) return;
    if (!(r.forward_fraction > 0)) {
        std::cout << "forward: " << m.precision().describe() << " emulated, not a fraction of a peak\n";
        return;
    }
    std::cout << std::setprecision(0) << "forward: " << 100 * r.forward_fraction << "% of " << r.threads_used << " × the per-core peak of "
              << (m.precision().precision == Precision::Fp32 ? "the kernels' width" : "its linears' instruction, "
                  + r.linears.back().kernel) << "\n";
}

// The --json form of the peak report (docs/cli.md, "vitreg bench --json"); 0 where not measured.
nlohmann::ordered_json peak_json(const PeakReport& r) {
    const CorePeak& p = r.core;
    nlohmann::ordered_json out = {{"fma256_gflops", p.fma256}, {"fma512_gflops", p.fma512},  {"bf16_gflops", p.bf16},
                                  {"int8_gops", p.int8},       {"int8_instruction", p.int8_instruction},
                                  {"int8_256_gops", p.int8_256}, {"int16_gops", p.int16},
                                  {"int16_instruction", p.int16_instruction},
                                  {"amx_int8_gops", p.amx_int8}, {"amx_bf16_gflops", p.amx_bf16},
                                  {"kernels", p.kernels},      {"kernel_peak_gflops", p.kernel_peak},
                                  {"linears", nlohmann::ordered_json::array()}};
    for (const LinearTimes& t : r.linears) {
        nlohmann::ordered_json layers = nlohmann::ordered_json::object();
        for (const auto& [name, g] : t.layers) layers[name] = g;
        out["linears"].push_back({{"precision", to_string(t.options.precision)}, {"kernel", t.kernel}, {"unit", t.unit},
                                  {"rows", t.rows}, {"layers", layers}, {"all", t.all},
                                  {"instruction_peak", t.instruction_peak}});
    }
    out["forward_fraction_of_peak"] = r.forward_fraction;
    return out;
}

struct BenchArgs {
    ModelArgs model;
    int batch = 1, threads = 0, iters = 10, warmup = 2;
    std::string size;
    std::vector<std::string> images;
    bool probe = false, peak = false, json = false;
};

// What one bench measured.
struct BenchResult {
    int height = 0, width = 0;
    std::vector<double> ms;  // ms per image of each timed forward, sorted
    double median = 0, p95 = 0, gflops = 0;
    std::string kernels;
    std::optional<PeakReport> peak;
    std::optional<FeatureAgreement> vs_fp32;
    std::string vs_fp32_skipped;  // why a reduced precision has no vs_fp32
    double load_seconds = 0;      // load_model: read, convert and pack the weights
    double peak_rss_mb = 0;       // the process's peak resident set through the timed forwards
    ForwardProfile profile;       // where the timed forwards' time went, summed over them
};

// The process's peak resident set so far, in MB (2^20 bytes).
double peak_rss_mb() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024;  // Linux: KB
}

// Why the fp32 model cannot be loaded beside `m` for the error (empty: it can): a checkpoint
// whose fp32 weights do not fit --max-memory beside the loaded ones (the 7B's 27 GB) is not
// loaded, and the bench keeps its times instead of failing after them.
std::string fp32_would_not_fit(const Model& m, const ModelRequest& request, const Config& c) {
    const std::int64_t cap = request.max_memory > 0 ? request.max_memory : default_memory_cap();
    const std::int64_t here = forward_memory(m, c.native_size(), c.native_size(), request.threads).weights;
    try {
        refuse_what_cannot_fit(request.model, c, Precision::Fp32, cap - here, request.threads);
    } catch (const UsageError& e) {
        return "the fp32 model does not fit beside this one (" + format_bytes(here) + " of weights) within --max-memory " +
               format_bytes(cap) + ": " + e.what();
    }
    return "";
}

// --size HxW, or the model's native size.
std::pair<int, int> bench_size(const Model& m, const std::string& size) {
    int h = m.config().native_size(), w = h;
    if (size.empty()) return {h, w};
    const auto x = size.find('x');
    try {
        if (x == std::string::npos) throw std::invalid_argument("x");
        h = std::stoi(size.substr(0, x));
        w = std::stoi(size.substr(x + 1));
    } catch (const std::exception&) {
        throw UsageError("bad --size '" + size + "' (expected HxW)");
    }
    return {h, w};
}

// The batch's pixels: --images resized to h x w (the batch becomes their count), else random
// normal values from a fixed seed.
std::vector<float> bench_pixels(const Model& m, BenchArgs& a, int h, int w) {
    std::vector<float> pixels;
    if (!a.images.empty()) {
        const auto files = expand_inputs(a.images);
        const Config& c = m.config();
        ResizeSpec resize;
        resize.mode = ResizeSpec::Mode::Exact;
        resize.width = w;
        resize.height = h;
        for (const auto& f : files) {
            const Pixels px = load_pixels(f, resize, c, ImageLimits{});
            pixels.insert(pixels.end(), px.chw.begin(), px.chw.end());
        }
        a.batch = static_cast<int>(files.size());
    } else {
        pixels.resize(static_cast<std::size_t>(a.batch) * 3 * h * w);
        std::mt19937 rng(0);
        std::normal_distribution<float> normal;
        for (auto& v : pixels) v = normal(rng);
    }
    return pixels;
}

// Times the forwards (after the warm-up ones), then measures the peak and the error against
// fp32 where asked.
BenchResult run_bench(const Model& m, BenchArgs& a) {
    BenchResult r;
    std::tie(r.height, r.width) = bench_size(m, a.size);
    const int h = r.height, w = r.width;
    const std::vector<float> pixels = bench_pixels(m, a, h, w);
    // The size was asked for: no bound in tokens, but the memory cap (--max-memory) holds.
    const ForwardOptions opt{a.threads, kMaxTokensFromMemory};
    Probe probe = a.probe ? Probe::statistics(m.config().depth) : Probe{};
    probe.profile = true;  // a few clock reads per linear: nothing beside the forward
    auto forward = [&] {
        Trace trace;
        m.forward(pixels.data(), a.batch, h, w, probe, trace, opt);
        return trace.profile;
    };
    for (int i = 0; i < a.warmup; ++i) forward();
    for (int i = 0; i < a.iters; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const ForwardProfile p = forward();
        r.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / a.batch);
        for (int stage = 0; stage < ForwardProfile::kStages; ++stage) r.profile.seconds[stage] += p.seconds[stage];
        r.profile.total += p.total;
    }
    std::sort(r.ms.begin(), r.ms.end());
    r.median = r.ms[r.ms.size() / 2];
    r.p95 = r.ms[std::min(r.ms.size() - 1, static_cast<std::size_t>(0.95 * static_cast<double>(r.ms.size())))];
    r.gflops = m.flops_per_image(h, w) / (r.median * 1e6);
    r.kernels = kernel_isa(m.precision().precision, m.precision().int8_weight_bits);
    r.peak_rss_mb = peak_rss_mb();
    if (a.peak) r.peak = measure_peak(m, a.batch, h, w, a.threads, r.gflops);
    // A quantized file has no fp32 forward (its source has: bench that for the error).
    const Checkpoint header(m.path(), a.model.request().overrides, CheckpointRead::HeaderOnly);
    if (m.precision().precision == Precision::Fp32) return r;
    if (header.quantization().quantized())
        r.vs_fp32_skipped = "a quantized file has no fp32 forward";
    else
        r.vs_fp32_skipped = fp32_would_not_fit(m, a.model.request(), header.config());
    if (r.vs_fp32_skipped.empty()) {
        // The error next to the speed: the same inputs through the fp32 forward.
        ModelRequest fp32 = a.model.request();
        fp32.precision = PrecisionOptions{};
        const Features want = load_model(fp32).forward(pixels.data(), a.batch, h, w, opt);
        r.vs_fp32 = agreement(m.forward(pixels.data(), a.batch, h, w, opt), want);
    }
    return r;
}

// ms per image of each stage of the timed forwards, in forward order.
nlohmann::ordered_json profile_json(const ForwardProfile& p, int images) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (int stage = 0; stage < ForwardProfile::kStages; ++stage) out[ForwardProfile::name(stage)] = 1e3 * p.seconds[stage] / images;
    return out;
}

// "profile: qkv 21% (50.1 ms), ...": each stage's share of the timed forwards and its ms per
// image; stages that took nothing (a GELU fused into fc1) are left out.
void print_profile(const ForwardProfile& p, int images) {
    if (!(p.total > 0)) return;
    std::cout << "  profile:";
    const char* separator = " ";
    for (int stage = 0; stage < ForwardProfile::kStages; ++stage) {
        if (!(p.seconds[stage] > 0)) continue;
        std::cout << separator << ForwardProfile::name(stage) << " " << std::setprecision(0) << 100 * p.seconds[stage] / p.total
                  << "% (" << std::setprecision(1) << 1e3 * p.seconds[stage] / images << " ms)";
        separator = ", ";
    }
    std::cout << " per image\n";
}

// docs/cli.md, "vitreg bench --json": fields are added, never renamed or removed.
nlohmann::ordered_json bench_json(const Model& m, const BenchArgs& a, const BenchResult& r) {
    const int h = r.height, w = r.width;
    const auto& e = r.vs_fp32;
    const Model::WeightBytes weights = m.weight_bytes();
    return {{"file", m.path()},
            {"height", h},
            {"width", w},
            {"batch", a.batch},
            {"threads", a.threads ? a.threads : static_cast<int>(std::thread::hardware_concurrency())},
            {"probe", a.probe},
            {"precision", m.precision().describe()},
            {"kernels", r.kernels},
            {"iters", a.iters},
            {"warmup", a.warmup},
            {"load_seconds", r.load_seconds},
            {"peak_rss_mb", r.peak_rss_mb},
            {"weights_held_mb", weights.held / 1048576},
            {"weights_mapped_mb", weights.mapped / 1048576},
            {"inputs", a.images.empty() ? "random" : "images"},
            {"ms_per_image", {{"median", r.median}, {"p95", r.p95}, {"min", r.ms.front()}, {"max", r.ms.back()}}},
            {"gflop_per_image", m.flops_per_image(h, w) / 1e9},
            {"gflops_per_second", r.gflops},
            {"profile", profile_json(r.profile, a.iters * a.batch)},
            {"peak", r.peak ? peak_json(*r.peak) : nlohmann::ordered_json()},
            {"vs_fp32", e ? nlohmann::ordered_json{{"cls_cosine_min", e->cls_cosine_min},
                                                   {"patch_cosine_mean", e->patch_cosine_mean},
                                                   {"patch_cosine_min", e->patch_cosine_min},
                                                   {"max_relative_error", e->max_relative_error}}
                          : nlohmann::ordered_json()},
            {"vs_fp32_skipped", r.vs_fp32_skipped.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(r.vs_fp32_skipped)}};
}

void print_bench(const Model& m, const BenchArgs& a, const BenchResult& r) {
    std::cout << std::fixed << std::setprecision(2) << "vitreg " << r.height << "x" << r.width << " batch=" << a.batch
              << " threads=" << (a.threads ? std::to_string(a.threads) : "all") << (a.probe ? " probe" : "")
              << " precision=" << m.precision().describe() << ": " << r.median << " ms/image median, " << r.p95
              << " p95, " << std::setprecision(1) << r.gflops << " GFLOP/s (" << std::setprecision(2)
              << m.flops_per_image(r.height, r.width) / 1e9 << " GFLOP/image; kernels " << r.kernels << ")\n";
    const Model::WeightBytes w = m.weight_bytes();
    std::cout << std::setprecision(2) << "  load " << r.load_seconds << " s; peak RSS " << std::setprecision(0) << r.peak_rss_mb
              << " MB through the timed forwards; linear weights " << w.held / 1048576 << " MB held"
              << (w.mapped ? ", " + std::to_string(w.mapped / 1048576) + " MB read in place from the file's pages" : "")
              << "\n";
    print_profile(r.profile, a.iters * a.batch);
    if (r.peak) print_peak(*r.peak, m);
    if (!r.vs_fp32_skipped.empty()) std::cout << "  vs fp32: not measured: " << r.vs_fp32_skipped << "\n";
    if (r.vs_fp32) {
        const FeatureAgreement& e = *r.vs_fp32;
        std::cout << std::setprecision(6) << "  vs fp32 on the same inputs: CLS cosine " << e.cls_cosine_min
                  << " (min over the batch), patch cosine " << e.patch_cosine_mean << " mean, " << e.patch_cosine_min
                  << " min, max relative error " << std::scientific << std::setprecision(2) << e.max_relative_error << "\n";
    }
}

}  // namespace

void register_bench(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("bench", "time the forward: ms/image (median, p95), GFLOP/s and each stage's share");
    auto a = std::make_shared<BenchArgs>();
    add_model_args(*cmd, a->model);
    cmd->add_option("--batch", a->batch, "images per forward")->check(CLI::Range(1, 1024))->capture_default_str();
    add_table_option(*cmd, "threads", a->threads);
    cmd->add_option("--size", a->size, "input HxW in pixels (default: the native grid)");
    cmd->add_option("--images", a->images,
                    "run these images, each resized to the bench size (--size, default native), instead of random "
                    "pixels; sets --batch to their count, and the error against fp32 is measured on them");
    cmd->add_option("--iters", a->iters, "timed forwards")->check(CLI::Range(1, 100000))->capture_default_str();
    cmd->add_option("--warmup", a->warmup, "untimed forwards first")->check(CLI::Range(0, 1000))->capture_default_str();
    cmd->add_flag("--probe", a->probe,
                  "time the forward that `vitreg maps` runs: CLS attention of every layer and head, norms, "
                  "abstention and key mass");
    cmd->add_flag("--peak", a->peak,
                  "also measure this CPU's per-core peak (fp32 FMA on 256 and 512 bits, the bf16, int8 and int16 dot "
                  "products, AMX's tiles), "
                  "time the model's linear layers alone on one thread, and state each as a fraction of the peak");
    cmd->add_flag("--json", a->json,
                  "print one JSON object instead of text: the run, ms_per_image, gflops_per_second and, where measured, "
                  "peak and vs_fp32 (docs/cli.md, \"vitreg bench --json\")");
    cmd->callback([&run, a] {
        run = [a] {
            const auto t0 = std::chrono::steady_clock::now();
            const Model m = load_model(a->model);
            const double load = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            BenchResult r = run_bench(m, *a);
            r.load_seconds = load;
            if (a->json) std::cout << bench_json(m, *a, r).dump(2) << "\n";
            else print_bench(m, *a, r);
            return 0;
        };
    });
}

}  // namespace vitreg::cli
