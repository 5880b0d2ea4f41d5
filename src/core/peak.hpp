#pragma once
// This CPU's measured arithmetic peak per core, so that speed can be stated as a fraction of
// what the core can do rather than as an adjective (vitreg bench --peak).
#include <string>

#include "vitreg/precision.hpp"

namespace vitreg {

struct CorePeak {
    double fma256 = 0;   // fp32 GFLOP/s of 256-bit FMAs on one core (0: no AVX2 + FMA)
    double fma512 = 0;   // the same on 512 bits (0: no AVX-512)
    double bf16 = 0;     // GFLOP/s of vdpbf16ps (2 per product; 0: no AVX512-BF16)
    double int8 = 0;     // int8 GOP/s (2 per multiply-add) of the int8 dot product below
    std::string int8_instruction;  // "vpdpbusd (512-bit)", "vpdpbusd (256-bit)", "vpmaddubsw + vpmaddwd", or ""
    double int8_256 = 0;  // GOP/s of vpdpbusd on 256 bits (0: no AVX512-VNNI nor AVX-VNNI)
    double int16 = 0;     // int16 GOP/s (2 per multiply-add) of vpdpwssd on its widest (0: no VNNI)
    std::string int16_instruction;  // "vpdpwssd (512-bit)", "vpdpwssd (256-bit)" (AVX-VNNI alone), or ""
    double amx_int8 = 0;  // GOP/s of AMX's tdpbusd on four 16 × 16 tiles (0: no usable AMX-INT8)
    double amx_bf16 = 0;  // GFLOP/s of AMX's tdpbf16ps, the same way (0: no usable AMX-BF16)
    // The fp32 kernels this process runs (after VITREG_ISA): their name, and the peak of their
    // width (fma512 for avx512, fma256 for avx2, 0 for portable code).
    std::string kernels;
    double kernel_peak = 0;
};

// Tight loops of independent multiply-adds on the calling thread, each run for about `seconds`
// of its CPU time (the best of five). Reads the hardware (cpu::detected), not VITREG_ISA's cap.
CorePeak measure_core_peak(double seconds = 0.08);

// Each rate the higher of two measurements: a host may lower the clock for a while (on a Zen 5
// guest, vpdpbusd measured 705-730 GOP/s straight after a two-thread forward and 960-1040
// alone), so bench measures before and after the layers it compares with the peak, and a
// share never rests on a dip.
CorePeak higher(const CorePeak& a, const CorePeak& b);

// The measured peak of the instruction the linears of `precision` run in this process (the fp32
// kernels' width, the tiles' for AMX, vpdpbusd's, vdpbf16ps', or the fp32 FMA's for bf16 on
// rounded operands; 0 where `peak` has none), and the kernel's name in `kernel`.
double precision_peak(const CorePeak& peak, const PrecisionOptions& precision, std::string* kernel);

// Single-thread GFLOP/s (GOP/s for int8) of one linear layer, y = x·Wᵀ + b for x [rows, in] and
// W [out, in], through the GEMM kernels this process runs for `precision` (int8: per token, the
// input's quantization included), best of `repeats`, in the thread's CPU time.
double linear_gflops(int rows, int in, int out, const PrecisionOptions& precision = {}, int repeats = 5);

}  // namespace vitreg
