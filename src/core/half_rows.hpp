#pragma once
// Float32 rows narrowed to IEEE half (f16 files), rounding to nearest even as float_to_half does:
// F16C's vcvtps2ph on 16 or 8 floats at a time where the CPU has it (chosen at run time with the
// other kernels, cpu.hpp), float_to_half's loop otherwise. The same bits at every level, except
// that a NaN keeps its payload under F16C where float_to_half writes the canonical quiet NaN.
#include <cstddef>
#include <cstdint>

#include "cpu.hpp"

namespace vitreg {

void floats_to_half(const float* x, std::size_t n, std::uint16_t* out);
// At a given level (the tests compare them); a level the CPU lacks runs the portable loop.
void floats_to_half(cpu::Level level, const float* x, std::size_t n, std::uint16_t* out);

}  // namespace vitreg
