#pragma once
// Register neurons (Jiang et al. 2025, DESIGN.md §9): the MLP neurons that write a trained
// model's high-norm outliers. Outlier positions are the patches the robust rule flags in the
// last block's output (before the final norm); score(l, n) = mean, over the images that have
// outliers, of the mean |activation| of layer l's neuron n (after GELU) at those positions.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "vitreg/analysis/calibrate.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/model.hpp"

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
// Here, not beside Intervention, because it reads the file. Throws UsageError / IoError.
std::vector<RegisterNeuron> parse_register_neurons(const std::string& spec);
void write_register_neurons(const std::string& path, const RegisterNeuronRanking& ranking);

// Accumulates scores from forwards whose Probe recorded norms and every layer's MLP activations.
class RegisterNeuronFinder {
public:
    RegisterNeuronFinder(int layers, int hidden, float mad_k = 10.0f);
    // Returns whether image b of the trace had outlier positions.
    bool observe(const Trace& trace, int b);
    // Throws Error when no image had outliers.
    RegisterNeuronRanking finish() const;

private:
    int layers_, hidden_;
    float mad_k_;
    std::vector<double> sum_;  // [layers, hidden]: Σ over images of the mean |activation|
    int images_ = 0;
};

// The probe RegisterNeuronFinder needs.
Probe register_neuron_probe(int depth);

RegisterNeuronRanking find_register_neurons(const Model& model, const std::vector<std::string>& images,
                                            const CalibrationOptions& options,
                                            const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace vitreg
