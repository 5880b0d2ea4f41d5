#pragma once
// Register neurons (Jiang et al. 2025, docs/design.md, "Interventions and the study"): the MLP
// neurons that write a trained model's high-norm outliers. Outlier positions are the patches the
// robust rule flags in the last block's output (before the final norm); score(l, n) = mean, over
// the images that have outliers, of the mean |activation| of layer l's neuron n (after GELU) at
// those positions.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "vitreg/analysis/calibrate.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/register_neuron_file.hpp"
#include "vitreg/model.hpp"

namespace vitreg {

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
