#pragma once
// A loaded ViT: weights packed once for the forward, immutable afterwards, safe to share
// between threads.
#include <memory>
#include <string>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/features.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

struct ForwardOptions {
    int threads = 0;  // oneTBB worker count for this call; 0 = all cores
};

class Model {
public:
    // Loads a checkpoint file or folder (see Checkpoint) and packs its weights.
    static Model load(const std::string& path, const ConfigOverrides& overrides = {});

    const Config& config() const;
    const std::string& path() const;

    // Runs `batch` preprocessed images of one size: `pixels` is [batch, 3, height, width]
    // float32, normalized; height and width must be multiples of the patch size.
    Features forward(const float* pixels, int batch, int height, int width, const ForwardOptions& options = {}) const;
    // The same forward, also recording what `probe` asks for into `trace`. Throws UsageError
    // for layers or queries out of range.
    Features forward(const float* pixels, int batch, int height, int width, const Probe& probe, Trace& trace,
                     const ForwardOptions& options = {}) const;

    // The per-head sink logits of a layer (zeros when the checkpoint has none).
    std::vector<float> sink_logits(int layer) const;

    // Multiply-adds × 2 of one image's forward at this input size.
    double flops_per_image(int height, int width) const;

private:
    struct Impl;
    std::shared_ptr<const Impl> impl_;
};

}  // namespace vitreg
