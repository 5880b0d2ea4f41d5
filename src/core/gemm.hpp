#pragma once
// Single-threaded SGEMM over weights packed once: C[m, cols] = A[m, k] · B[k, cols].
// B is stored as column panels [k][nr] so the micro-kernel streams it; A is read in place
// (row-major, any stride). Each C element is one FMA chain over k in order, whatever the
// tiling, so results never depend on how the work was split or on the thread count.
// The kernel is chosen at run time: AVX-512, AVX2+FMA, or portable C++.
#include "aligned_memory.hpp"

namespace vitreg::gemm {

// Instruction sets with a micro-kernel; best() is what this CPU runs.
enum class Isa { Avx512, Avx2, Portable };
Isa best();
bool supported(Isa isa);

struct PackedMatrix {
    int k = 0;   // rows of B
    int n = 0;   // columns of B
    int nr = 0;  // panel width of the kernel it was packed for
    Isa isa = Isa::Portable;
    Buffer data;  // ceil(n / nr) panels of [k][nr], zero-padded (may be longer: reused storage)
    int panels() const { return (n + nr - 1) / nr; }
};

// Packs B [k, n] given row-major with row stride ldb.
PackedMatrix pack(const float* b, int k, int n, long ldb, Isa isa = best());
// The same into an existing PackedMatrix, reusing its storage when it is large enough; with
// `bf16`, each value rounded to bf16 (bf16 operands through the fp32 kernel: the same products,
// exact in fp32, summed in k order where vdpbf16ps sums pairs).
void pack_into(PackedMatrix& into, const float* b, int k, int n, long ldb, Isa isa = best(), bool bf16 = false);
// Packs B = scale · Tᵀ for T [n, k] given row-major with row stride ldt into `into` (W's rows of a
// linear, scale 1; keys for Q·Kᵀ, with the attention scale folded in: exact when it is a power of
// two, as 1/√64 is).
void pack_transposed_into(PackedMatrix& into, const float* t, int n, int k, long ldt, float scale = 1.0f,
                          Isa isa = best(), bool bf16 = false);

// What the kernel does with a finished tile while it is still in registers. Both vectors are
// indexed by B's column and may be null.
struct Epilogue {
    const float* bias = nullptr;   // Y = A·B + bias
    const float* scale = nullptr;  // set: C += scale ⊙ Y (LayerScale and the residual add); null: C = Y
};

// Y = acc + bias; C = Y, or C += scale ⊙ Y: column j of one row (finish_value), or one row of
// `cols` finished values, in scalar code (the kernels without a vector epilogue share it).
inline void finish_value(float acc, int j, const float* bias, const float* scale, float* c) {
    const float y = bias ? acc + bias[j] : acc;
    c[j] = scale ? c[j] + scale[j] * y : y;
}
inline void finish_row(const float* acc, int cols, const float* bias, const float* scale, float* c) {
    for (int j = 0; j < cols; ++j) finish_value(acc[j], j, bias, scale, c);
}

// C[0:m, c0:c1] = epilogue(A[0:m, 0:k] · B[:, c0:c1]); c0 must be a multiple of b.nr. ldc is
// C's row stride and `c` points at C[0, c0].
void multiply(const float* a, long lda, int m, const PackedMatrix& b, int c0, int c1, float* c, long ldc,
              const Epilogue& epilogue = {});

// A's rows as the kernel of `b` reads them fastest: packed_strip(b) rows at a time as [k][rows]
// (0: that kernel reads A in place, use multiply). pack_rows writes rows r0 .. r0 + rows of A
// [m, k] (stride lda) at out + r0 · k; multiply_packed takes them (ap: the packed row 0 of the
// range, m rows) and gives multiply's result, bit for bit.
int packed_strip(const PackedMatrix& b);
void pack_rows(const float* a, long lda, int m, int k, int strip, float* out);
void multiply_packed(const float* ap, int m, const PackedMatrix& b, int c0, int c1, float* c, long ldc,
                     const Epilogue& epilogue = {});

}  // namespace vitreg::gemm
