// The per-core peak (vitreg bench --peak): each instruction the CPU has is measured, each it lacks
// is 0, and VITREG_ISA (catch2_as_*) caps the kernels, never what the hardware is measured at.
#include <catch2/catch.hpp>
#include <string>

#include "core/peak.hpp"
#include "cpu.hpp"

using namespace vitreg;

TEST_CASE("the peak measures every dot product the hardware has, whatever VITREG_ISA says", "[peak]") {
    const cpu::Features& hw = cpu::detected();
    const CorePeak p = measure_core_peak(0.002);  // short: this checks which, not how fast
    CHECK((p.fma256 > 0) == hw.avx2_fma);
    CHECK((p.fma512 > 0) == hw.avx512);
    CHECK((p.bf16 > 0) == hw.avx512_bf16);
    const bool vnni256 = hw.avx_vnni || (hw.avx512 && hw.avx512_vnni);
    CHECK((p.int8_256 > 0) == vnni256);
    CHECK((p.int16 > 0) == (hw.avx512_vnni || hw.avx_vnni));
    if (hw.avx512_vnni) {
        CHECK(p.int8_instruction == "vpdpbusd (512-bit)");
        CHECK(p.int16_instruction == "vpdpwssd (512-bit)");
    } else if (hw.avx_vnni) {
        CHECK(p.int8_instruction == "vpdpbusd (256-bit)");
        CHECK(p.int16_instruction == "vpdpwssd (256-bit)");
        CHECK(p.int8 == p.int8_256);  // the one measurement, not two
    } else {
        CHECK(p.int16_instruction.empty());
    }
    // Two int16 products in a lane where vpdpbusd has four int8 ones: at most vpdpbusd's rate
    // (with room for the timing's noise; both run on the same ports).
    if (p.int16 > 0) CHECK(p.int16 < 1.5 * p.int8);
    CHECK(p.kernels == cpu::describe_level());
}

TEST_CASE("two peak measurements combine rate by rate, the higher of each", "[peak]") {
    CorePeak a, b;
    a.fma256 = 100, b.fma256 = 120;
    a.fma512 = 250, b.fma512 = 240;
    a.bf16 = 450, b.bf16 = 0;  // (a rate one measurement lacks keeps the other's)
    a.int8 = 700, b.int8 = 1000;
    a.int8_256 = 280, b.int8_256 = 270;
    a.int16 = 500, b.int16 = 510;
    a.amx_int8 = 3000, b.amx_int8 = 3100;
    a.amx_bf16 = 1600, b.amx_bf16 = 1500;
    a.kernel_peak = 250, b.kernel_peak = 240;
    a.int8_instruction = "vpdpbusd (512-bit)", b.int8_instruction = "vpdpbusd (256-bit)";
    a.kernels = "avx512", b.kernels = "avx2";
    const CorePeak h = higher(a, b);
    CHECK(h.fma256 == 120);
    CHECK(h.fma512 == 250);
    CHECK(h.bf16 == 450);
    CHECK(h.int8 == 1000);
    CHECK(h.int8_256 == 280);
    CHECK(h.int16 == 510);
    CHECK(h.amx_int8 == 3100);
    CHECK(h.amx_bf16 == 1600);
    CHECK(h.kernel_peak == 250);
    CHECK(h.int8_instruction == "vpdpbusd (512-bit)");  // the names are the first measurement's
    CHECK(h.kernels == "avx512");
}
