#pragma once
// One configuration of the calls that show several side by side (compare, explore): the model
// as it runs (attention, precision, intervention) and the label the outputs give it.
#include <string>

#include "vitreg/model.hpp"

namespace vitreg {

struct LabelledModel {
    std::string label;
    Model model;
};

}  // namespace vitreg
