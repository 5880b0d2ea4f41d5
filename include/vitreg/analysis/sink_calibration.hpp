#pragma once
// Retrofitting a sink logit into a trained model (docs/design.md, "Interventions and the study"):
// per layer and head, the logit s whose null mass e^s / (e^s + Σ_{j≠k} e^z) matches, on calibration
// images, the mass the head puts on its sink key k (the key with the largest mean received
// attention in each image). Bisection on [−30, 30] to 1e-6; s is monotone in that mass.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "vitreg/analysis/calibrate.hpp"
#include "vitreg/model.hpp"

namespace vitreg {

struct SinkCalibration {
    int layers = 0, heads = 0;
    std::vector<float> sinks;        // [layers, heads] the fitted logits
    std::vector<float> target_mass;  // [layers, heads] mean attention on the sink key
    std::vector<std::string> images;
    std::string source, source_digest;
    float sink(int layer, int head) const { return sinks[static_cast<std::size_t>(layer) * heads + head]; }
};

// Accumulates, per layer and head, each query's log Σ_{j≠k} e^z and the mass on k, from
// forwards whose Probe recorded key mass and qkv of every layer (sink_calibration_probe).
class SinkCalibrator {
public:
    SinkCalibrator(int layers, int heads, int head_dim);
    void observe(const Trace& trace);
    SinkCalibration finish() const;  // Error when nothing was observed

private:
    int layers_, heads_, head_dim_;
    std::vector<std::vector<float>> rest_;  // [layers*heads][queries seen]: log Σ_{j≠k} e^(z_qj)
    std::vector<double> mass_;              // [layers*heads] Σ over queries of A[q, k]
};

Probe sink_calibration_probe(int depth);

SinkCalibration calibrate_sink(const Model& model, const std::vector<std::string>& images, const CalibrationOptions& options,
                               const std::function<void(std::size_t, std::size_t)>& progress = {});

// Writes the checkpoint of `model` (its weights as float32, in the dinov2 layout) with
// `blocks.i.attn.sinks` and attention=sink, metadata recording the method, the source's digest
// and the images; with `evict_sink`, metadata evict=sink: every run of the file also evicts each
// head's sink key, so the logit stands in for it. Atomic (temporary name, then rename).
void write_sink_checkpoint(const Model& model, const SinkCalibration& calibration, bool evict_sink,
                           const std::string& out);

}  // namespace vitreg
