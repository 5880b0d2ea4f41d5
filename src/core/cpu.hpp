#pragma once
// What this CPU can run, read once from CPUID, and the kernel set the process chooses from it.
// VITREG_ISA=avx512|avx2|portable caps that choice (to measure or test a path on a machine that
// has a faster one; avx2 is a plain AVX2 + FMA CPU such as Zen 3: no AVX-512, no AVX-VNNI).
// A value the CPU cannot run, or one that is not a kernel set, is an error at first use.
// VITREG_BF16_ISA=avx512-bf16|fp32 picks bf16's kernel the same way (gemm_lowp.hpp).
#include <string>

namespace vitreg::cpu {

struct Features {
    bool avx2_fma = false;    // AVX2 and FMA (x86-64-v3's vector part)
    bool avx512 = false;      // AVX-512 F, BW, VL and DQ
    bool f16c = false;        // vcvtps2ph (with AVX2: every x86-64-v3 CPU)
    bool avx512_bf16 = false; // vdpbf16ps
    // vdpbf16ps at the rate of vfmadd (two bf16 products per fp32 lane per FMA slot): taken to be
    // AMD's (Zen 4 and Zen 5 list it at the FMA's throughput; not yet measured here). An Intel
    // Xeon ran it at half that (123 against 246 GFLOP/s, `vitreg bench --peak`), no faster than
    // fp32, so bf16 there runs rounded operands through the fp32 kernels unless
    // VITREG_BF16_ISA=avx512-bf16 asks for it.
    bool bf16_dot_full_rate = false;
    bool avx512_vnni = false; // vpdpbusd on 512 bits (and, with VL, on 256)
    bool avx_vnni = false;    // vpdpbusd on 256 bits, VEX-encoded (Alder Lake, Zen 5)
    // AMX's int8 tiles (tdpbusd: Sapphire Rapids and later Xeons), with the OS's tile state
    // enabled and this process granted it (Linux's ARCH_REQ_XCOMP_PERM).
    bool amx_int8 = false;
    bool amx_bf16 = false;    // AMX's bf16 tiles (tdpbf16ps), on the same terms
};

enum class Level { Portable, Avx2, Avx512 };

// The hardware's features, whatever VITREG_ISA says.
const Features& detected();
// What the kernels may use: the hardware's features capped by VITREG_ISA. Throws vitreg::Error
// on a bad VITREG_ISA.
const Features& usable();
// The widest level of `usable()`.
Level level();
const char* to_string(Level level);
// "avx2" or "avx2 (VITREG_ISA; the CPU has avx512)": for bench and info lines.
std::string describe_level();

}  // namespace vitreg::cpu
