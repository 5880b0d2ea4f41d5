#pragma once
// Static int8 activation ranges (`--act-quant per-tensor`): the input range of every linear of
// an fp32 forward over calibration images, min/max or a percentile of their values.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "vitreg/image.hpp"
#include "vitreg/model.hpp"
#include "vitreg/precision.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

struct CalibrationOptions {
    // 100: min and max. Below: the P-th and (100 − P)-th percentiles of all the values each
    // linear saw (nearest rank), which keeps every value in memory (4 bytes per activation).
    double percentile = 100.0;
    ResizeSpec resize;
    ImageLimits image_limits;
    std::int64_t max_tokens = kDefaultMaxTokens;
    int threads = 0;
};

// Accumulates the ranges from forwards whose Probe asked for linear_inputs.
class Int8Calibrator {
public:
    explicit Int8Calibrator(double percentile = 100.0);  // UsageError unless in (50, 100]
    void observe(const Trace& trace);
    // Throws Error when nothing was observed or a range is not finite.
    Int8Calibration finish();

private:
    double percentile_;
    std::map<std::string, ActivationRange> ranges_;     // min/max
    std::map<std::string, std::vector<float>> values_;  // percentile: every value
};

// Runs `model` on each image in turn, one at a time, recording `probe`, and hands each trace
// (batch 1) to `observe` with the image's index. Throws on an image that cannot be read (a
// calibration set should be clean) and UsageError for an empty list.
void observe_images(const Model& model, const std::vector<std::string>& images, const CalibrationOptions& options,
                    const Probe& probe, const std::function<void(const Trace&, std::size_t)>& observe,
                    const std::function<void(std::size_t, std::size_t)>& progress = {});

// Runs `model` (which must be fp32) on each image in turn. Throws on an image that cannot be
// read (a calibration set should be clean) and UsageError for an empty list or bad percentile.
Int8Calibration calibrate_int8(const Model& model, const std::vector<std::string>& images, const CalibrationOptions& options,
                               const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace vitreg
