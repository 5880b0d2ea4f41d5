#pragma once
// What the parity tests against the upstream code (tests/upstream/) share: one case of a
// cases.json run through a vitreg model.
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "vitreg/model.hpp"

namespace vitreg::test {

// The model's forward on the case's batch `input_key` of its inputs file, at its height and width.
inline Features run_upstream_case(const Model& m, const nlohmann::json& c, const std::string& input_key) {
    const SafetensorsFile inputs(fixture(c["inputs"].get<std::string>()));
    const auto input = tensor(inputs, input_key);
    const int batch = static_cast<int>(inputs.get(input_key).shape[0]);
    return m.forward(input.data(), batch, c["height"].get<int>(), c["width"].get<int>(), ForwardOptions{2});
}

}  // namespace vitreg::test
