#include "vitreg/intervention.hpp"

#include <algorithm>

#include "vitreg/error.hpp"
#include "core/parse_number.hpp"
#include "core/robust_outliers.hpp"

namespace vitreg {

Eviction Eviction::parse(const std::string& text) {
    Eviction e;
    if (text == "none") return e;
    const auto parts = split(text, ',');
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const std::string& p = parts[i];
        if (p == "sink") e.sink = true;
        else if (p == "artifacts") e.artifacts = true;
        else if (p == "registers") e.registers = true;
        else if (p.rfind("patch:", 0) == 0 && i + 1 < parts.size())  // "patch:R,C" spans two pieces
            e.tokens.push_back(TokenRef::parse(p + "," + parts[++i]));
        else if (p == "cls" || p.rfind("reg:", 0) == 0 || p.rfind("patch:", 0) == 0)
            e.tokens.push_back(TokenRef::parse(p));
        else
            throw UsageError("--evict: unknown entry '" + p +
                             "' (expected sink, artifacts, registers, cls, reg:K or patch:R,C)");
    }
    return e;
}

std::string Eviction::to_string() const {
    std::string s;
    const auto add = [&](const std::string& w) { s += (s.empty() ? "" : ",") + w; };
    if (sink) add("sink");
    if (artifacts) add("artifacts");
    if (registers) add("registers");
    for (const auto& t : tokens) add(t.to_string());
    return s.empty() ? "none" : s;
}

std::string to_string(const std::vector<RegisterNeuron>& neurons) {
    std::string s;
    for (const auto& n : neurons) s += (s.empty() ? "" : ",") + std::to_string(n.layer) + ":" + std::to_string(n.neuron);
    return s;
}

std::string Intervention::to_string() const {
    std::string s;
    if (evict.any()) s = "evict=" + evict.to_string();
    if (test_time_registers)
        s += (s.empty() ? "" : " ") + std::string("ttr=") + std::to_string(test_time_registers) +
             " neurons=" + vitreg::to_string(register_neurons);
    for (std::size_t i = 0; i < repairs.size(); ++i)
        s += (i ? "@" : s.empty() ? "repair=" : " repair=") + repairs[i].to_string();
    // A denoise's shifts, stated where its outputs are recorded (rows:columns, in patches).
    for (const Repair& r : repairs)
        if (r.shifts > 0) {  // a denoise
            s += " shifts=";
            for (const auto& shift : denoise_shifts(r.shifts))
                s += (s.back() == '=' ? "" : ",") + std::to_string(shift[0]) + ":" + std::to_string(shift[1]);
        }
    return s.empty() ? "none" : s;
}

int Intervention::forwards_per_image() const {
    int n = 1;
    for (const Repair& r : repairs) n = std::max(n, r.forwards_per_image());
    return n;
}

void Intervention::validate(const Config& c) const {
    if (test_time_registers < 0) throw UsageError("--ttr must not be negative");
    if (test_time_registers > 0 && register_neurons.empty())
        throw UsageError("--ttr needs --register-neurons (made by vitreg find-register-neurons, or L:N,...)");
    if (test_time_registers == 0 && !register_neurons.empty())
        throw UsageError("--register-neurons needs --ttr K: the neurons' maxima go to test-time registers");
    for (const auto& n : register_neurons)
        if (n.layer < 0 || n.layer >= c.depth || n.neuron < 0 || n.neuron >= c.mlp_hidden)
            throw UsageError("register neuron " + std::to_string(n.layer) + ":" + std::to_string(n.neuron) +
                             " is outside the model (" + std::to_string(c.depth) + " layers of " +
                             std::to_string(c.mlp_hidden) + " MLP neurons)");
    int denoises = 0;
    for (const Repair& r : repairs) {
        r.validate(c);
        if (r.shifts > 0 && ++denoises > 1) throw UsageError("@" + r.to_string() + ": a second @denoise");
    }
}

std::vector<std::uint8_t> eviction_mask(const Eviction& e, const Trace& t, AttentionKind kind, float mad_k) {
    const std::size_t N = static_cast<std::size_t>(t.tokens);
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(t.layers) * t.batch * t.heads * N, 0);
    std::vector<std::uint8_t> always(N, 0);  // the same keys in every layer, image and head
    for (const auto& token : e.tokens) always[static_cast<std::size_t>(token.token_index(t.registers, t.grid_h, t.grid_w, t.class_token))] = 1;
    if (e.registers)
        std::fill(always.begin() + t.register_offset(), always.begin() + t.patch_offset(), std::uint8_t(1));
    if (e.sink && t.key_mass.empty()) throw Error("eviction_mask: the first forward recorded no key mass");
    if (e.artifacts && t.norms.empty()) throw Error("eviction_mask: the first forward recorded no norms");
    const int last = t.layers - 1, p0 = t.patch_offset();
    for (int b = 0; b < t.batch; ++b) {
        std::vector<std::uint8_t> image = always;
        if (e.artifacts) {
            const float* norms = t.norms_of(last, b);
            for (int i : robust_outliers(std::vector<float>(norms + p0, norms + p0 + t.patch_count()), mad_k))
                image[static_cast<std::size_t>(p0 + i)] = 1;
        }
        for (int l = 0; l < t.layers; ++l)
            for (int h = 0; h < t.heads; ++h) {
                std::uint8_t* m = mask.data() + ((static_cast<std::size_t>(l) * t.batch + b) * t.heads + h) * N;
                std::copy(image.begin(), image.end(), m);
                if (e.sink) {
                    const float* mass = t.key_mass_of(l, b, h);
                    m[std::max_element(mass, mass + N) - mass] = 1;
                }
                if (kind == AttentionKind::Softmax && std::count(m, m + N, std::uint8_t(1)) == static_cast<std::ptrdiff_t>(N))
                    throw UsageError("--evict " + e.to_string() + " leaves layer " + std::to_string(l) + " head " +
                                     std::to_string(h) + " no key, and softmax must attend somewhere");
            }
    }
    return mask;
}

}  // namespace vitreg
