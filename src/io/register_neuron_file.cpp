#include "vitreg/register_neuron_file.hpp"

#include <algorithm>
#include <cstdint>

#include "core/json_limits.hpp"
#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

constexpr const char* kNeuronsFormat = "vitreg-register-neurons";
constexpr int kNeuronsVersion = 1;
// The bounds of a layer and a neuron index, in the file as on the command line.
constexpr long kMaxLayer = 1 << 20, kMaxNeuron = 1 << 30;

}  // namespace

void write_register_neurons(const std::string& path, const RegisterNeuronRanking& r) {
    nlohmann::ordered_json ranked = nlohmann::ordered_json::array(), selected = nlohmann::ordered_json::array();
    for (const auto& s : r.ranked) ranked.push_back({{"layer", s.layer}, {"neuron", s.neuron}, {"score", s.score}});
    for (const auto& n : r.selected) selected.push_back({n.layer, n.neuron});
    const nlohmann::ordered_json j = {
        {"format", kNeuronsFormat},     {"version", kNeuronsVersion},           {"model", r.model},
        {"rule", "norm > median + " + std::to_string(r.mad_k) + " MAD, last block, patches"},
        {"mad_k", r.mad_k},      {"images", r.images},            {"images_with_outliers", r.with_outliers},
        {"selected", selected},  {"ranked", ranked},
    };
    write_file_atomic(path, j.dump(1) + "\n");
}

RegisterNeuronRanking read_register_neurons(const std::string& path) {
    const nlohmann::json j = read_format_file(path, kNeuronsFormat, kNeuronsVersion, "register-neuron file", "vitreg find-register-neurons");
    const auto fail = [&](const std::string& why) { return IoError(path + ": not a vitreg register-neuron file: " + why); };
    // A whole number in [0, hi]: nlohmann's get<int>() converts 1e30 or 2.5 without a word (1e30
    // is undefined behaviour).
    const auto index_of = [&](const nlohmann::json& v, long hi, const char* what) {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > hi)
            throw fail(std::string(what) + " is not an integer in 0.." + std::to_string(hi));
        return static_cast<int>(v.get<std::int64_t>());
    };
    RegisterNeuronRanking r;
    try {
        r.model = j.value("model", "");
        r.images = j.value("images", std::vector<std::string>{});
        r.with_outliers = j.value("images_with_outliers", std::vector<std::string>{});
        r.mad_k = j.value("mad_k", 10.0f);
        for (const auto& e : j.at("ranked"))
            r.ranked.push_back({index_of(e.at("layer"), kMaxLayer, "a layer"), index_of(e.at("neuron"), kMaxNeuron, "a neuron"),
                                e.at("score").get<double>()});
        for (const auto& e : j.at("selected")) {
            if (!e.is_array() || e.size() != 2) throw fail("a \"selected\" entry is not [layer, neuron]");
            r.selected.push_back({index_of(e[0], kMaxLayer, "a layer"), index_of(e[1], kMaxNeuron, "a neuron")});
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
        const auto layer = colon == std::string::npos ? std::nullopt : parse_integer(p.substr(0, colon), 0, kMaxLayer);
        const auto neuron = colon == std::string::npos ? std::nullopt : parse_integer(p.substr(colon + 1), 0, kMaxNeuron);
        if (!layer || !neuron)
            throw UsageError("--register-neurons: bad entry '" + p + "' (expected LAYER:NEURON, or a neurons.json)");
        const RegisterNeuron n{static_cast<int>(*layer), static_cast<int>(*neuron)};
        if (std::find(neurons.begin(), neurons.end(), n) == neurons.end()) neurons.push_back(n);
    }
    return neurons;
}

}  // namespace vitreg
