#include "cpu.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdlib>
#include <cstring>

#include "vitreg/error.hpp"

namespace vitreg::cpu {

namespace {

#if defined(__x86_64__)
// AMX-TILE (CPUID.(EAX=7, ECX=0):EDX bit 24), the OS saving the tile state (XCR0 bits 17 and
// 18), and, on Linux, the process's permission to use it: the kernel leaves the tile data
// disabled until a process asks, and a tile instruction without it is a SIGILL.
bool amx_tiles_usable() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24))) return false;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__)
    constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kXtileData = 18;         // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
    return false;
#endif
}
#endif

Features read_cpuid() {
    Features f;
#if defined(__x86_64__)
    __builtin_cpu_init();
    // __builtin_cpu_supports checks the OS's XSAVE state too (YMM, and ZMM for AVX-512).
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
    unsigned max_leaf = 0, vendor[3] = {0, 0, 0};
    __get_cpuid(0, &max_leaf, &vendor[0], &vendor[2], &vendor[1]);  // "AuthenticAMD" in EBX, EDX, ECX
    f.bf16_dot_full_rate = f.avx512_bf16 && std::memcmp(vendor, "AuthenticAMD", 12) == 0;
    f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
    // AVX-VNNI is CPUID.(EAX=7, ECX=1):EAX bit 4 (not every compiler's __builtin_cpu_supports
    // knows it); its registers are AVX2's, whose OS support the avx2 check covers.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    f.f16c = f.avx2_fma && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));  // CPUID.1:ECX bit 29
    f.avx_vnni = f.avx2_fma && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4));
    // AMX-INT8 and AMX-BF16: CPUID.(EAX=7, ECX=0):EDX bits 25 and 22.
    const bool tiles = f.avx512 && amx_tiles_usable() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx);
    f.amx_int8 = tiles && (edx & (1u << 25));
    f.amx_bf16 = tiles && (edx & (1u << 22));
#endif
    return f;
}

Level level_of(const Features& f) { return f.avx512 ? Level::Avx512 : f.avx2_fma ? Level::Avx2 : Level::Portable; }

Features capped(Features f, Level cap) {
    if (cap < Level::Avx512) f.avx512 = f.avx512_bf16 = f.bf16_dot_full_rate = f.avx512_vnni = f.amx_int8 = f.amx_bf16 = false;
    if (cap < Level::Avx2) f = Features{};
    if (cap == Level::Avx2) f.avx_vnni = false;  // a plain AVX2 + FMA CPU
    return f;
}

Features resolve() {
    const Features& hw = detected();
    const char* env = std::getenv("VITREG_ISA");
    if (!env || !*env) return hw;
    Level want;
    if (!std::strcmp(env, "avx512")) want = Level::Avx512;
    else if (!std::strcmp(env, "avx2")) want = Level::Avx2;
    else if (!std::strcmp(env, "portable")) want = Level::Portable;
    else throw Error(std::string("VITREG_ISA='") + env + "' is not a kernel set (avx512, avx2 or portable)");
    if (want > level_of(hw))
        throw Error(std::string("VITREG_ISA=") + env + ": this CPU cannot run it (its best is " +
                    to_string(level_of(hw)) + ")");
    return capped(hw, want);
}

}  // namespace

const Features& detected() {
    static const Features f = read_cpuid();
    return f;
}

const Features& usable() {
    static const Features f = resolve();  // a throw leaves it unset: the next call throws again
    return f;
}

Level level() { return level_of(usable()); }

const char* to_string(Level level) {
    switch (level) {
        case Level::Avx512: return "avx512";
        case Level::Avx2: return "avx2";
        case Level::Portable: return "portable";
    }
    return "?";
}

std::string describe_level() {
    const Level run = level(), hw = level_of(detected());
    std::string s = to_string(run);
    if (run != hw) s += std::string(" (VITREG_ISA; the CPU has ") + to_string(hw) + ")";
    return s;
}

}  // namespace vitreg::cpu
