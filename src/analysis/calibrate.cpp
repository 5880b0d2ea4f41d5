#include "vitreg/analysis/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// The value of nearest rank q ∈ [0, 1] among `v` (reordered).
float rank(std::vector<float>& v, double q) {
    const auto k = static_cast<std::size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

}  // namespace

Int8Calibrator::Int8Calibrator(double percentile) : percentile_(percentile) {
    if (!(percentile > 50.0 && percentile <= 100.0))
        throw UsageError("calibrate-int8: the percentile must be in (50, 100] (got " + std::to_string(percentile) + ")");
}

void Int8Calibrator::observe(const Trace& t) {
    for (std::size_t l = 0; l < t.linear_names.size(); ++l) {
        const auto& in = t.linear_inputs[l];
        if (in.empty()) continue;
        if (percentile_ < 100.0) {
            auto& v = values_[t.linear_names[l]];
            v.insert(v.end(), in.begin(), in.end());
            continue;
        }
        const auto [lo, hi] = std::minmax_element(in.begin(), in.end());
        const auto it = ranges_.find(t.linear_names[l]);
        if (it == ranges_.end()) ranges_[t.linear_names[l]] = {*lo, *hi};
        else it->second = {std::min(it->second.min, *lo), std::max(it->second.max, *hi)};
    }
}

Int8Calibration Int8Calibrator::finish() {
    Int8Calibration cal;
    cal.method = percentile_ < 100.0 ? "percentile" : "minmax";
    cal.percentile = percentile_;
    cal.ranges = ranges_;
    for (auto& [name, v] : values_) cal.ranges[name] = {rank(v, 1.0 - percentile_ / 100.0), rank(v, percentile_ / 100.0)};
    if (cal.ranges.empty()) throw Error("calibrate-int8: no linear inputs were observed");
    for (const auto& [name, r] : cal.ranges)
        if (!std::isfinite(r.min) || !std::isfinite(r.max))
            throw Error("calibrate-int8: the input of " + name + " is not finite (a broken checkpoint?)");
    return cal;
}

void observe_images(const Model& model, const std::vector<std::string>& images, const CalibrationOptions& o,
                    const Probe& probe, const std::function<void(const Trace&, std::size_t)>& observe,
                    const std::function<void(std::size_t, std::size_t)>& progress) {
    if (images.empty()) throw UsageError("no calibration images");
    const Config& c = model.config();
    for (std::size_t i = 0; i < images.size(); ++i) {
        const Pixels px = load_pixels(images[i], o.resize, c, o.image_limits);
        model.check_tokens(px.height, px.width, o.max_tokens, images[i]);
        Trace t;
        model.forward(px.chw.data(), 1, px.height, px.width, probe, t, ForwardOptions{o.threads, o.max_tokens});
        observe(t, i);
        if (progress) progress(i + 1, images.size());
    }
}

Int8Calibration calibrate_int8(const Model& model, const std::vector<std::string>& images, const CalibrationOptions& o,
                               const std::function<void(std::size_t, std::size_t)>& progress) {
    if (model.precision().precision != Precision::Fp32)
        throw UsageError("calibrate-int8 observes the fp32 forward (the model was loaded as " +
                         model.precision().describe() + ")");
    Int8Calibrator calibrator(o.percentile);
    Probe probe;
    probe.linear_inputs = true;
    observe_images(model, images, o, probe, [&](const Trace& t, std::size_t) { calibrator.observe(t); }, progress);
    Int8Calibration cal = calibrator.finish();
    cal.model = model.path();
    cal.images = images;
    return cal;
}

}  // namespace vitreg
