#include "vitreg/analysis/register_neurons.hpp"

#include <algorithm>
#include <cmath>

#include "core/json_limits.hpp"
#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/stats.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

RegisterNeuronFinder::RegisterNeuronFinder(int layers, int hidden, float mad_k)
    : layers_(layers), hidden_(hidden), mad_k_(mad_k), sum_(static_cast<std::size_t>(layers) * hidden, 0.0) {}

Probe register_neuron_probe(int depth) {
    Probe p;
    p.norms = true;
    for (int l = 0; l < depth; ++l) p.mlp_layers.push_back(l);
    return p;
}

bool RegisterNeuronFinder::observe(const Trace& t, int b) {
    if (t.norms.empty() || static_cast<int>(t.mlp_layers.size()) != layers_ || t.mlp_hidden != hidden_)
        throw Error("register neurons: the trace lacks norms or some layer's MLP activations");
    ArtifactRules rules;
    rules.rule.mad_k = mad_k_;
    const auto outliers = layer_stats(t, b, t.layers - 1, rules).artifact_tokens_robust;
    if (outliers.empty()) return false;
    for (std::size_t slot = 0; slot < t.mlp_layers.size(); ++slot) {
        const float* act = t.mlp_of(static_cast<int>(slot), b);
        double* sum = sum_.data() + static_cast<std::size_t>(t.mlp_layers[slot]) * hidden_;
        for (int n = 0; n < hidden_; ++n) {
            double s = 0;
            for (int token : outliers) s += std::fabs(act[static_cast<std::size_t>(token) * hidden_ + n]);
            sum[n] += s / static_cast<double>(outliers.size());
        }
    }
    ++images_;
    return true;
}

RegisterNeuronRanking RegisterNeuronFinder::finish() const {
    if (images_ == 0)
        throw Error("find-register-neurons: no image has outlier patches (norm > median + " + std::to_string(mad_k_) +
                    "·MAD at the output), so there is nothing to move into registers");
    RegisterNeuronRanking r;
    r.mad_k = mad_k_;
    std::vector<ScoredNeuron> all;
    for (int l = 0; l < layers_; ++l)
        for (int n = 0; n < hidden_; ++n) {
            const double s = sum_[static_cast<std::size_t>(l) * hidden_ + n] / images_;
            all.push_back({l, n, s});
        }
    std::stable_sort(all.begin(), all.end(), [](const ScoredNeuron& a, const ScoredNeuron& b) { return a.score > b.score; });
    // Selected: the neurons scoring at least half the best. Register neurons stand far above the
    // rest (the planted one 7.9 against 2.9 for the next), and the ordinary ones form a long tail
    // that a median/MAD rule would let in by the dozen.
    for (const auto& s : all)
        if (s.score >= 0.5 * all.front().score) r.selected.push_back({s.layer, s.neuron});
        else break;
    all.resize(std::min(all.size(), RegisterNeuronRanking::kKeep));
    r.ranked = std::move(all);
    return r;
}

RegisterNeuronRanking find_register_neurons(const Model& model, const std::vector<std::string>& images,
                                            const CalibrationOptions& o,
                                            const std::function<void(std::size_t, std::size_t)>& progress) {
    const Config& c = model.config();
    RegisterNeuronFinder finder(c.depth, c.mlp_hidden);
    std::vector<std::string> with_outliers;
    observe_images(model, images, o, register_neuron_probe(c.depth),
                   [&](const Trace& t, std::size_t i) {
                       if (finder.observe(t, 0)) with_outliers.push_back(images[i]);
                   },
                   progress);
    RegisterNeuronRanking r = finder.finish();
    r.model = model.path();
    r.images = images;
    r.with_outliers = std::move(with_outliers);
    return r;
}

}  // namespace vitreg
