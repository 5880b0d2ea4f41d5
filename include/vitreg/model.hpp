#pragma once
// A loaded ViT: weights packed once for the forward, immutable afterwards, safe to share
// between threads. Forwards reuse activation memory: the model keeps one workspace per
// concurrent forward, as large as the largest batch × size it has run, until it is destroyed.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/features.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/precision.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

// The default bound on the tokens of one image's forward: as many as the model's memory cap
// holds (Model::memory_cap, --max-memory): an input whose forward_memory estimate exceeds the cap
// is refused before anything is allocated. A positive bound counts tokens; 0 is no bound.
constexpr std::int64_t kMaxTokensFromMemory = -1;
constexpr std::int64_t kDefaultMaxTokens = kMaxTokensFromMemory;

struct ForwardOptions {
    int threads = 0;  // oneTBB worker count for this call; 0 = all cores
    std::int64_t max_tokens = kDefaultMaxTokens;  // per image; larger inputs are refused
    // Run in the calling thread's oneTBB arena instead of a `threads`-wide one of the model's:
    // for callers that run the forward as one stage of their own pipeline in an arena they
    // sized, so that every stage shares its threads (a nested arena would hold one back).
    bool in_current_arena = false;
};

class Model {
public:
    // Loads a checkpoint file or folder (see Checkpoint) and packs its weights for `precision`
    // (throws UsageError for contradictory options, IoError for a bad calibration file).
    static Model load(const std::string& path, const ConfigOverrides& overrides = {},
                      const PrecisionOptions& precision = {});

    const Config& config() const;
    const PrecisionOptions& precision() const;
    const std::string& path() const;

    // The same weights (shared, not copied) running `intervention` on every forward; a
    // checkpoint's own (metadata evict=sink) stays. Throws UsageError for one that does not fit.
    Model with(const Intervention& intervention) const;
    const Intervention& intervention() const { return intervention_; }
    // The same model with the memory its forwards may use (bytes; 0: default_memory_cap()),
    // which bounds the tokens where max_tokens is kMaxTokensFromMemory.
    Model with_memory_cap(std::int64_t bytes) const;
    std::int64_t memory_cap() const;
    // Register tokens of a forward: the trained ones, then the test-time ones.
    int registers() const;

    // Runs `batch` preprocessed images of one size: `pixels` is [batch, 3, height, width]
    // float32, normalized; height and width must be multiples of the patch size. The model's
    // intervention applies; an eviction of per-image keys runs a first forward to find them.
    Features forward(const float* pixels, int batch, int height, int width, const ForwardOptions& options = {}) const;
    // The same forward, also recording what `probe` asks for into `trace`. Throws UsageError
    // for layers or queries out of range.
    Features forward(const float* pixels, int batch, int height, int width, const Probe& probe, Trace& trace,
                     const ForwardOptions& options = {}) const;

    // The per-head sink logits of a layer (zeros when the checkpoint has none).
    std::vector<float> sink_logits(int layer) const;

    // Tokens of one image's forward at this input size: CLS, registers (test-time ones too) and patches.
    std::int64_t tokens(int height, int width) const;
    // Throws UsageError naming `name` when an input of this size exceeds `max_tokens`, or, with
    // kMaxTokensFromMemory, when its forward's estimated memory exceeds memory_cap() (the
    // message states both).
    void check_tokens(int height, int width, std::int64_t max_tokens, const std::string& name) const;

    // The linears' weights: bytes `held` in memory the model allocated (packed, quantized), and
    // bytes read in place from the checkpoint's mapped pages (--file-weights mapped: bf16 weights
    // stored as bf16, or an int8 or int4 file's; shared with the page cache and any other process reading the file).
    struct WeightBytes {
        std::int64_t held = 0, mapped = 0;
    };
    WeightBytes weight_bytes() const;

    // Multiply-adds × 2 of one image's forward at this input size.
    double flops_per_image(int height, int width) const;

private:
    struct Impl;
    std::shared_ptr<const Impl> impl_;
    Intervention intervention_;
    std::int64_t memory_cap_ = 0;
};

}  // namespace vitreg
