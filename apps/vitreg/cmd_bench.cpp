// vitreg bench MODEL: forward latency and throughput on random input.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <random>
#include <thread>

#include "common.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "core/peak.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg::cli {

namespace {

// The measured per-core peak, the model's linear layers alone on one thread against the peak
// of the width the kernels run, and the whole forward against threads × that peak.
void print_peak(const Model& m, int batch, int h, int w, int threads, double forward_gflops) {
    const CorePeak peak = measure_core_peak();
    const double width_peak = peak.kernel_peak;
    std::cout << std::fixed << std::setprecision(1) << "peak per core: fp32 FMA " << peak.fma256 << " GFLOP/s (256-bit)";
    if (peak.fma512 > 0) std::cout << ", " << peak.fma512 << " GFLOP/s (512-bit)";
    if (peak.bf16 > 0) std::cout << "; bf16 vdpbf16ps " << peak.bf16 << " GFLOP/s";
    if (peak.int8 > 0) std::cout << "; int8 " << peak.int8 << " GOP/s (" << peak.int8_instruction << ")";
    if (peak.amx_int8 > 0) std::cout << "; AMX int8 " << peak.amx_int8 << " GOP/s (tdpbusd)";
    if (peak.amx_bf16 > 0) std::cout << "; AMX bf16 " << peak.amx_bf16 << " GFLOP/s (tdpbf16ps)";
    std::cout << "\n";
    if (!(width_peak > 0)) return;
    const Config& c = m.config();
    const int rows = batch * (c.prefix_tokens() + c.registers + (h / c.patch) * (w / c.patch));
    const int hidden = c.mlp_hidden;
    struct Shape {
        const char* name;
        int in, out;
    };
    const Shape shapes[] = {{"qkv", c.dim, 3 * c.dim}, {"proj", c.dim, c.dim}, {"fc1", c.dim, c.mlp == MlpKind::SwiGlu ? 2 * hidden : hidden},
                            {"fc2", hidden, c.dim}};
    // The four linears alone on one thread: on the fp32 kernels against their width's peak, then,
    // for a reduced-precision run, on its own kernels against the instruction they run (the
    // tiles' where the kernel is AMX's; the input's rounding or quantization included).
    const auto time_linears = [&](const PrecisionOptions& precision) {
        std::string kernel;
        const double own = precision_peak(peak, precision, &kernel);
        const bool fp32 = precision.precision == Precision::Fp32;
        const char* unit = precision.precision == Precision::Int8 ? "GOP/s" : "GFLOP/s";
        std::cout << std::setprecision(1) << "linear layers, " << to_string(precision.precision) << ", 1 thread, " << rows
                  << " rows (kernels " << kernel << "):";
        double ops = 0, seconds = 0;
        for (const Shape& s : shapes) {
            const double g = linear_gflops(rows, s.in, s.out, precision);
            const double f = 2.0 * rows * s.in * s.out;
            ops += f;
            seconds += f / (g * 1e9);
            std::cout << " " << s.name << " " << g << " " << unit;
            if (own > 0) std::cout << " (" << std::setprecision(0) << 100 * g / own << "%)" << std::setprecision(1);
        }
        std::cout << "; all four " << ops / seconds / 1e9 << " " << unit;
        if (own > 0)
            std::cout << " = " << std::setprecision(0) << 100 * ops / seconds / 1e9 / own
                      << (fp32 ? "% of the peak of their width" : "% of its instruction's peak");
        std::cout << "\n";
    };
    time_linears(PrecisionOptions{});
    if (m.precision().precision != Precision::Fp32) {
        time_linears(m.precision());
        std::cout << "forward: " << m.precision().describe() << ", not a fraction of the fp32 peak\n";
        return;
    }
    const int used = threads ? threads : static_cast<int>(std::thread::hardware_concurrency());
    std::cout << std::setprecision(0) << "forward: " << 100 * forward_gflops / (used * width_peak) << "% of " << used
              << " × the per-core peak of the kernels' width\n";
}

}  // namespace

void register_bench(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("bench", "time the forward: ms/image (median, p95) and GFLOP/s");
    struct Args {
        ModelArgs model;
        int batch = 1, threads = 0, iters = 10, warmup = 2;
        std::string size;
        std::vector<std::string> images;
        bool probe = false, peak = false;
    };
    auto a = std::make_shared<Args>();
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
                  "also measure this CPU's per-core peak (fp32 FMA on 256 and 512 bits, the int8 dot product), "
                  "time the model's linear layers alone on one thread, and state each as a fraction of the peak");
    cmd->callback([&run, a] {
        run = [a] {
            const Model m = load_model(a->model);
            int h = m.config().native_size(), w = h;
            if (!a->size.empty()) {
                const auto x = a->size.find('x');
                try {
                    if (x == std::string::npos) throw std::invalid_argument("x");
                    h = std::stoi(a->size.substr(0, x));
                    w = std::stoi(a->size.substr(x + 1));
                } catch (const std::exception&) {
                    throw UsageError("bad --size '" + a->size + "' (expected HxW)");
                }
            }
            std::vector<float> pixels;
            if (!a->images.empty()) {
                const auto files = expand_inputs(a->images);
                const Config& c = m.config();
                ResizeSpec resize;
                resize.mode = ResizeSpec::Mode::Exact;
                resize.width = w;
                resize.height = h;
                for (const auto& f : files) {
                    const Pixels px = load_pixels(f, resize, c, ImageLimits{});
                    pixels.insert(pixels.end(), px.chw.begin(), px.chw.end());
                }
                a->batch = static_cast<int>(files.size());
            } else {
                pixels.resize(static_cast<std::size_t>(a->batch) * 3 * h * w);
                std::mt19937 rng(0);
                std::normal_distribution<float> normal;
                for (auto& v : pixels) v = normal(rng);
            }
            // The size was asked for: no bound in tokens, but the memory cap (--max-memory) holds.
            const ForwardOptions opt{a->threads, kMaxTokensFromMemory};
            const Probe probe = a->probe ? Probe::statistics(m.config().depth) : Probe{};
            auto forward = [&] {
                Trace trace;
                m.forward(pixels.data(), a->batch, h, w, probe, trace, opt);
            };
            for (int i = 0; i < a->warmup; ++i) forward();
            std::vector<double> ms;
            for (int i = 0; i < a->iters; ++i) {
                const auto t0 = std::chrono::steady_clock::now();
                forward();
                ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / a->batch);
            }
            std::sort(ms.begin(), ms.end());
            const double median = ms[ms.size() / 2];
            const double p95 = ms[std::min(ms.size() - 1, static_cast<std::size_t>(0.95 * static_cast<double>(ms.size())))];
            const double gflops = m.flops_per_image(h, w) / (median * 1e6);
            std::cout << std::fixed << std::setprecision(2) << "vitreg " << h << "x" << w << " batch=" << a->batch
                      << " threads=" << (a->threads ? std::to_string(a->threads) : "all") << (a->probe ? " probe" : "")
                      << " precision=" << m.precision().describe() << ": " << median << " ms/image median, " << p95
                      << " p95, " << std::setprecision(1) << gflops << " GFLOP/s (" << std::setprecision(2)
                      << m.flops_per_image(h, w) / 1e9 << " GFLOP/image; kernels " << kernel_isa(m.precision().precision, m.precision().int8_weight_bits)
                      << ")\n";
            if (a->peak) print_peak(m, a->batch, h, w, a->threads, gflops);
            if (m.precision().precision != Precision::Fp32) {
                // The error next to the speed: the same inputs through the fp32 forward.
                ModelRequest fp32 = a->model.request();
                fp32.precision = PrecisionOptions{};
                const Features want = load_model(fp32).forward(pixels.data(), a->batch, h, w, opt);
                const FeatureAgreement e = agreement(m.forward(pixels.data(), a->batch, h, w, opt), want);
                std::cout << std::setprecision(6) << "  vs fp32 on the same inputs: CLS cosine " << e.cls_cosine_min
                          << " (min over the batch), patch cosine " << e.patch_cosine_mean << " mean, "
                          << e.patch_cosine_min << " min, max relative error " << std::scientific << std::setprecision(2)
                          << e.max_relative_error << "\n";
            }
            return 0;
        };
    });
}

}  // namespace vitreg::cli
