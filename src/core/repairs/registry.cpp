// The repair kinds, in the order the model name's help lists them. Adding a kind is one file
// defining its NAME_repair(), plus its declaration and its entry here.
#include "core/repairs/repair_type.hpp"

namespace vitreg {

const RepairType& inpaint_repair();    // inpaint.cpp
const RepairType& denoise_repair();    // denoise.cpp
const RepairType& debias_repair();     // debias.cpp
const RepairType& registers_repair();  // registers.cpp

const std::vector<const RepairType*>& repair_types() {
    static const std::vector<const RepairType*> all = {
        &inpaint_repair(),
        &denoise_repair(),
        &debias_repair(),
        &registers_repair(),
    };
    return all;
}

}  // namespace vitreg
