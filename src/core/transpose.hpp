#pragma once
// A block of 32-bit values transposed: what the in-place linears (kernels.hpp, Linear::mapped) do
// to their input (token rows into panels) and to each tile (W · xᵀ into token rows).
#include <cstdint>

namespace vitreg::gemm {

// dst[c · ldd + r] = src[r · lds + c] for r < rows, c < cols (strides in values); 16 × 16 blocks
// through AVX-512 registers where the CPU has it.
void transpose32(const std::uint32_t* src, long lds, int rows, int cols, std::uint32_t* dst, long ldd);

}  // namespace vitreg::gemm
