#include "vitreg/model_spec.hpp"

#include <algorithm>
#include <filesystem>

#include "vitreg/error.hpp"
#include "core/parse_number.hpp"
#include "vitreg/register_neuron_file.hpp"

namespace vitreg {

namespace {

// "ORG/NAME" that is not a path on disk: a Hugging Face hub id, whose "@REVISION" is its own. A
// name the file system cannot look up (too long) is no path either.
bool names_a_hub_repo(const std::string& s) {
    std::error_code ec;
    return std::count(s.begin(), s.end(), '/') == 1 && s.front() != '/' && s.front() != '.' && s.back() != '/' &&
           !std::filesystem::exists(s, ec);
}

}  // namespace

ModelSpec ModelSpec::parse(const std::string& text) {
    ModelSpec m;
    m.model = text;
    for (auto at = m.model.rfind('@'); at != std::string::npos; at = m.model.rfind('@')) {
        const std::string s = m.model.substr(at + 1);
        if (const auto kind = find_enum<AttentionKind>(s)) {
            if (m.attention) throw UsageError(text + ": two attention kinds");
            m.attention = kind;
        } else if (s == "fp32" || s == "bf16" || s == "int8" || s == "int4" || s.rfind("int8=", 0) == 0) {
            if (m.precision) throw UsageError(text + ": two precisions");
            PrecisionOptions p;
            p.precision = parse_precision(s.substr(0, 4));
            if (s.size() > 5) {
                p.act_quant = ActQuant::PerTensor;
                p.scales = s.substr(5);
            }
            m.precision = p;
        } else if (s.rfind("evict=", 0) == 0) {
            Intervention& edit = m.intervention ? *m.intervention : m.intervention.emplace();
            if (edit.evict.any()) throw UsageError(text + ": two @evict=");
            edit.evict = Eviction::parse(s.substr(6));
        } else if (s.rfind("ttr=", 0) == 0) {
            Intervention& edit = m.intervention ? *m.intervention : m.intervention.emplace();
            if (edit.test_time_registers) throw UsageError(text + ": two @ttr=");
            const auto colon = s.find(':');
            const auto k = colon == std::string::npos ? std::nullopt : parse_integer(s.substr(4, colon - 4), 1, 64);
            if (!k) throw UsageError(text + ": expected @ttr=K:NEURONS (K in 1..64, NEURONS a neurons.json[:TOP] or L:N,...)");
            edit.test_time_registers = static_cast<int>(*k);
            edit.register_neurons = parse_register_neurons(s.substr(colon + 1));
        } else if (Repair::names_repair(s)) {
            // Peeled from the right: each goes in front, so they stay in the order written.
            Intervention& edit = m.intervention ? *m.intervention : m.intervention.emplace();
            edit.repairs.insert(edit.repairs.begin(), Repair::parse(s));
        } else if (names_a_hub_repo(m.model.substr(0, at))) {
            break;  // ORG/NAME@REVISION
        } else {
            throw UsageError(text + ": unknown suffix '@" + s +
                             "' (expected an attention kind: softmax, softmax1, sink; a precision: fp32, bf16, "
                             "int8, int8=SCALES.json, int4; an intervention: evict=LIST, ttr=K:NEURONS; or a repair: " +
                             repair_forms() + ")");
        }
        m.suffix = "@" + s + m.suffix;
        m.model.resize(at);
    }
    if (m.model.empty()) throw UsageError("'" + text + "' names no model");
    return m;
}

std::string ModelSpec::to_string() const {
    std::string s = model;
    if (attention) s += "@" + vitreg::to_string(*attention);
    if (precision) {
        s += "@" + vitreg::to_string(precision->precision);
        if (precision->act_quant == ActQuant::PerTensor) s += "=" + precision->scales;
    }
    if (intervention && intervention->evict.any()) s += "@evict=" + intervention->evict.to_string();
    if (intervention && intervention->test_time_registers)
        s += "@ttr=" + std::to_string(intervention->test_time_registers) + ":" +
             vitreg::to_string(intervention->register_neurons);
    if (intervention)
        for (const Repair& r : intervention->repairs) s += "@" + r.to_string();
    return s;
}

std::string ModelSpec::label() const {
    std::string stem = model.substr(model.find_last_of('/') + 1);
    const std::string ext = ".safetensors";
    if (stem.size() > ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0) stem.resize(stem.size() - ext.size());
    return stem + suffix;
}

}  // namespace vitreg
