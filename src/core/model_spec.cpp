#include "vitreg/model_spec.hpp"

#include "vitreg/error.hpp"

namespace vitreg {

ModelSpec ModelSpec::parse(const std::string& text) {
    ModelSpec m;
    m.model = text;
    for (auto at = m.model.rfind('@'); at != std::string::npos; at = m.model.rfind('@')) {
        const std::string s = m.model.substr(at + 1);
        if (s == "softmax" || s == "softmax1" || s == "sink") {
            if (m.attention) throw UsageError(text + ": two attention kinds");
            m.attention = parse_attention_kind(s);
        } else if (s == "fp32" || s == "bf16" || s == "int8" || s.rfind("int8=", 0) == 0) {
            if (m.precision) throw UsageError(text + ": two precisions");
            PrecisionOptions p;
            p.precision = parse_precision(s.substr(0, 4));
            if (s.size() > 5) {
                p.act_quant = ActQuant::PerTensor;
                p.scales = s.substr(5);
            }
            m.precision = p;
        } else {
            break;
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
    return s;
}

}  // namespace vitreg
