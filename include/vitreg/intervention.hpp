#pragma once
// Changing what a forward computes (docs/design.md, "Interventions and the study"): the one door
// for edits, as the Probe is the one door for looking. A Model carries one (Model::with) and every
// forward of it applies it.
//
// - Eviction: chosen keys get logit −∞ for every query, head and layer. Softmax renormalizes
//   over the other keys; softmax-1 and sink keep their null term. Evicted tokens still compute
//   their own rows (they stay queries). Keys that depend on the image (each head's sink key, the
//   artifact tokens) come from a first forward of the same image without the eviction.
// - Test-time registers (Jiang et al. 2025): K extra tokens after the trained registers, zero
//   and without position embedding. In each layer holding a chosen MLP neuron n, right after the
//   activation, n's value on the test-time registers becomes its maximum over the image's
//   tokens, and on the patches 0.
// - Repairs (vitreg/repair.hpp): edits of the residual stream after chosen blocks, in order.
#include <cstdint>
#include <string>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/probe.hpp"
#include "vitreg/repair.hpp"

namespace vitreg {

struct RegisterNeuron {
    int layer = 0, neuron = 0;
    bool operator==(const RegisterNeuron& o) const { return layer == o.layer && neuron == o.neuron; }
};

struct Eviction {
    bool sink = false;       // each layer's and head's key with the largest mean received attention α
    // the patches the robust rule flags at the output (docs/design.md, "Artifact metrics")
    bool artifacts = false;
    bool registers = false;  // every register: trained and test-time
    std::vector<TokenRef> tokens;

    // Comma-separated: sink, artifacts, registers, cls, reg:K, patch:R,C (or "none").
    // Throws UsageError naming the bad entry.
    static Eviction parse(const std::string& text);
    std::string to_string() const;  // parses back; "none" when nothing is evicted
    bool any() const { return sink || artifacts || registers || !tokens.empty(); }
    // Whether the keys depend on the image (a first forward finds them).
    bool per_image() const { return sink || artifacts; }
};

struct Intervention {
    Eviction evict;
    int test_time_registers = 0;
    std::vector<RegisterNeuron> register_neurons;
    std::vector<Repair> repairs;  // applied in this order

    bool empty() const { return !evict.any() && test_time_registers == 0 && repairs.empty(); }
    // One line, for run.json, job identity and reports: "evict=sink ttr=1 neurons=1:21
    // repair=inpaint=artifacts@denoise=shift:4 shifts=0:0,1:1,-1:-1,1:-1" ("none").
    std::string to_string() const;
    // Forwards of one image: a denoise's K, else 1 (a per-image eviction's first forward aside).
    int forwards_per_image() const;
    // Throws UsageError for test-time registers without neurons (or the reverse), for
    // neurons outside the model and for a repair that cannot apply to it (Repair::validate).
    void validate(const Config& config) const;
};

std::string to_string(const std::vector<RegisterNeuron>& neurons);  // "1:21,3:7"

// Which keys every (layer, image, head) evicts: [layers, batch, heads, tokens], 1 = evicted.
// `first` is the first forward's trace: its shape always, its key_mass for `sink` and its
// norms for `artifacts` (rule: median + mad_k·MAD over the patches of the last layer). Throws
// UsageError when a softmax head would be left without keys.
std::vector<std::uint8_t> eviction_mask(const Eviction& evict, const Trace& first, AttentionKind kind,
                                        float mad_k = 10.0f);

}  // namespace vitreg
