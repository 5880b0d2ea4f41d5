#include "vitreg/analysis/sink_calibration.hpp"

#include "vitreg/canonical_checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "io/file_digest.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

// Mean over the observed queries of the null mass σ(s − r_q) = e^s / (e^s + e^r_q).
double null_mass(const std::vector<float>& rest, double s) {
    double sum = 0;
    for (float r : rest) sum += 1.0 / (1.0 + std::exp(static_cast<double>(r) - s));
    return sum / static_cast<double>(rest.size());
}

// The s in [−30, 30] where the mean null mass meets `target` (increasing in s), to 1e-6.
double bisect(const std::vector<float>& rest, double target) {
    double lo = -30, hi = 30;
    while (hi - lo > 1e-6) {
        const double mid = 0.5 * (lo + hi);
        (null_mass(rest, mid) < target ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

}  // namespace

Probe sink_calibration_probe(int depth) {
    Probe p;
    p.key_mass = true;
    for (int l = 0; l < depth; ++l) p.qkv_layers.push_back(l);
    return p;
}

SinkCalibrator::SinkCalibrator(int layers, int heads, int head_dim)
    : layers_(layers), heads_(heads), head_dim_(head_dim), rest_(static_cast<std::size_t>(layers) * heads),
      mass_(static_cast<std::size_t>(layers) * heads, 0.0) {}

void SinkCalibrator::observe(const Trace& t) {
    if (t.key_mass.empty() || static_cast<int>(t.qkv_layers.size()) != layers_)
        throw Error("sink calibration: the trace lacks key mass or some layer's qkv");
    const int N = t.tokens, D = t.dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
    std::vector<double> z(static_cast<std::size_t>(N));
    for (int b = 0; b < t.batch; ++b)
        for (std::size_t slot = 0; slot < t.qkv_layers.size(); ++slot) {
            const int l = t.qkv_layers[slot];
            const float* qkv = t.qkv_of(static_cast<int>(slot), b);
            for (int h = 0; h < heads_; ++h) {
                const float* mass = t.key_mass_of(l, b, h);
                const int k = static_cast<int>(std::max_element(mass, mass + N) - mass);
                auto& rest = rest_[static_cast<std::size_t>(l) * heads_ + h];
                mass_[static_cast<std::size_t>(l) * heads_ + h] += static_cast<double>(mass[k]) * N;
                for (int q = 0; q < N; ++q) {
                    const float* qv = qkv + static_cast<std::size_t>(q) * 3 * D + h * head_dim_;
                    double m = -INFINITY;
                    for (int j = 0; j < N; ++j) {
                        const float* kv = qkv + static_cast<std::size_t>(j) * 3 * D + D + h * head_dim_;
                        double dot = 0;
                        for (int d = 0; d < head_dim_; ++d) dot += static_cast<double>(qv[d]) * kv[d];
                        z[static_cast<std::size_t>(j)] = dot * scale;
                        if (j != k) m = std::max(m, z[static_cast<std::size_t>(j)]);
                    }
                    double sum = 0;
                    for (int j = 0; j < N; ++j)
                        if (j != k) sum += std::exp(z[static_cast<std::size_t>(j)] - m);
                    rest.push_back(static_cast<float>(m + std::log(sum)));
                }
            }
        }
}

SinkCalibration SinkCalibrator::finish() const {
    if (rest_.empty() || rest_.front().empty()) throw Error("calibrate-sink: nothing was observed");
    SinkCalibration c;
    c.layers = layers_;
    c.heads = heads_;
    for (std::size_t i = 0; i < rest_.size(); ++i) {
        const double target = mass_[i] / static_cast<double>(rest_[i].size());
        c.target_mass.push_back(static_cast<float>(target));
        c.sinks.push_back(static_cast<float>(bisect(rest_[i], target)));
    }
    return c;
}

SinkCalibration calibrate_sink(const Model& model, const std::vector<std::string>& images, const CalibrationOptions& o,
                               const std::function<void(std::size_t, std::size_t)>& progress) {
    if (!model.intervention().empty())
        throw UsageError("calibrate-sink fits the checkpoint as trained; drop the intervention (" +
                         model.intervention().to_string() + ")");
    const Config& c = model.config();
    SinkCalibrator calibrator(c.depth, c.heads, c.head_dim);
    observe_images(model, images, o, sink_calibration_probe(c.depth),
                   [&](const Trace& t, std::size_t) { calibrator.observe(t); }, progress);
    SinkCalibration cal = calibrator.finish();
    cal.images = images;
    cal.source = model.path();
    cal.source_digest = file_digest(model.path());
    return cal;
}

void write_sink_checkpoint(const Model& model, const SinkCalibration& cal, bool evict_sink, const std::string& out) {
    const Config& c = model.config();
    if (cal.layers != c.depth || cal.heads != c.heads)
        throw UsageError("calibrate-sink: the calibration has " + std::to_string(cal.layers) + "x" +
                         std::to_string(cal.heads) + " logits, the model " + std::to_string(c.depth) + "x" +
                         std::to_string(c.heads));
    CanonicalWrite w;
    w.sinks = cal.sinks;
    w.metadata = {
        {"sink_calibration", "observed sink mass, bisection on [-30, 30] to 1e-6 (vitreg calibrate-sink)"},
        {"source", cal.source},
        {"source_digest", cal.source_digest},
        {"source_attention", to_string(c.attention)},
        {"calibration_images", nlohmann::json(cal.images).dump()},
    };
    if (evict_sink) w.metadata["evict"] = "sink";
    write_canonical_checkpoint(Checkpoint(model.path()), c, w, out);
}

}  // namespace vitreg
