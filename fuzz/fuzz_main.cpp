// One libFuzzer binary per target: VITREG_FUZZ_TARGET names it (see targets.hpp).
#include <cstddef>
#include <cstdint>

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    vitreg::fuzz::run_target(VITREG_FUZZ_TARGET, data, size);
    return 0;
}
