#include "vitreg/analysis/register_neurons.hpp"

#include <algorithm>
#include <cmath>

#include "core/json_limits.hpp"
#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/stats.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

constexpr const char* kFormat = "vitreg-register-neurons";
constexpr int kVersion = 1;

}  // namespace

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
    rules.mad_k = mad_k_;
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

void write_register_neurons(const std::string& path, const RegisterNeuronRanking& r) {
    nlohmann::ordered_json ranked = nlohmann::ordered_json::array(), selected = nlohmann::ordered_json::array();
    for (const auto& s : r.ranked) ranked.push_back({{"layer", s.layer}, {"neuron", s.neuron}, {"score", s.score}});
    for (const auto& n : r.selected) selected.push_back({n.layer, n.neuron});
    const nlohmann::ordered_json j = {
        {"format", kFormat},     {"version", kVersion},           {"model", r.model},
        {"rule", "norm > median + " + std::to_string(r.mad_k) + " MAD, last block, patches"},
        {"mad_k", r.mad_k},      {"images", r.images},            {"images_with_outliers", r.with_outliers},
        {"selected", selected},  {"ranked", ranked},
    };
    write_file_atomic(path, j.dump(1) + "\n");
}

RegisterNeuronRanking read_register_neurons(const std::string& path) {
    const nlohmann::json j = read_format_file(path, kFormat, kVersion, "register-neuron file", "vitreg find-register-neurons");
    const auto fail = [&](const std::string& why) { return IoError(path + ": not a vitreg register-neuron file: " + why); };
    RegisterNeuronRanking r;
    try {
        r.model = j.value("model", "");
        r.images = j.value("images", std::vector<std::string>{});
        r.with_outliers = j.value("images_with_outliers", std::vector<std::string>{});
        r.mad_k = j.value("mad_k", 10.0f);
        for (const auto& e : j.at("ranked")) r.ranked.push_back({e.at("layer").get<int>(), e.at("neuron").get<int>(), e.at("score").get<double>()});
        for (const auto& e : j.at("selected")) {
            if (!e.is_array() || e.size() != 2) throw fail("a \"selected\" entry is not [layer, neuron]");
            r.selected.push_back({e[0].get<int>(), e[1].get<int>()});
        }
    } catch (const nlohmann::json::exception& e) {
        throw fail(e.what());
    }
    if (r.selected.empty() || r.ranked.empty()) throw fail("no neurons");
    return r;
}

std::vector<RegisterNeuron> parse_register_neurons(const std::string& spec) {
    const auto json = spec.find(".json");
    if (json != std::string::npos) {
        const std::string path = spec.substr(0, json + 5), rest = spec.substr(json + 5);
        const RegisterNeuronRanking r = read_register_neurons(path);
        if (rest.empty()) return r.selected;
        const auto top = rest[0] == ':' ? parse_integer(rest.substr(1), 1, 1 << 20) : std::nullopt;
        if (!top) throw UsageError("--register-neurons " + spec + ": expected FILE.json or FILE.json:TOP");
        std::vector<RegisterNeuron> best;
        for (std::size_t i = 0; i < r.ranked.size() && best.size() < static_cast<std::size_t>(*top); ++i)
            best.push_back({r.ranked[i].layer, r.ranked[i].neuron});
        return best;
    }
    std::vector<RegisterNeuron> neurons;
    for (const auto& p : split(spec, ',')) {
        const auto colon = p.find(':');
        const auto layer = colon == std::string::npos ? std::nullopt : parse_integer(p.substr(0, colon), 0, 1 << 20);
        const auto neuron = colon == std::string::npos ? std::nullopt : parse_integer(p.substr(colon + 1), 0, 1 << 30);
        if (!layer || !neuron)
            throw UsageError("--register-neurons: bad entry '" + p + "' (expected LAYER:NEURON, or a neurons.json)");
        const RegisterNeuron n{static_cast<int>(*layer), static_cast<int>(*neuron)};
        if (std::find(neurons.begin(), neurons.end(), n) == neurons.end()) neurons.push_back(n);
    }
    return neurons;
}

}  // namespace vitreg
