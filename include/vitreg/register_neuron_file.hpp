#pragma once
// The register-neuron file (neurons.json) that `vitreg find-register-neurons` writes and
// "--register-neurons" / "@ttr=K:NEURONS" read: a file format, so the core reads it and the
// analysis layer (which finds the neurons) writes it through the same code.
#include <cstddef>
#include <string>
#include <vector>

#include "vitreg/intervention.hpp"

namespace vitreg {

struct ScoredNeuron {
    int layer = 0, neuron = 0;
    double score = 0;
};

// What `vitreg find-register-neurons` writes ("format": "vitreg-register-neurons", version 1).
struct RegisterNeuronRanking {
    std::string model;
    std::vector<std::string> images;      // the images searched
    std::vector<std::string> with_outliers;  // those that had outlier positions (the scores' images)
    float mad_k = 10.0f;                  // the outlier rule: norm > median + mad_k·MAD
    std::vector<ScoredNeuron> ranked;     // best first (the file keeps the top kKeep)
    std::vector<RegisterNeuron> selected;  // the neurons scoring at least half the best
    static constexpr std::size_t kKeep = 256;
};

RegisterNeuronRanking read_register_neurons(const std::string& path);  // IoError naming the fault
// "L:N,L:N,..." or "neurons.json[:TOP]" (vitreg find-register-neurons' file: its TOP best,
// or without TOP the ones it selected): what --register-neurons and "@ttr=K:NEURONS" take.
// Throws UsageError / IoError.
std::vector<RegisterNeuron> parse_register_neurons(const std::string& spec);
void write_register_neurons(const std::string& path, const RegisterNeuronRanking& ranking);

}  // namespace vitreg
