#pragma once
// AMX's tiles as the int8 and bf16 kernels and the peak loop use them (x86-64 only): eight tiles
// of 16 rows × 64 bytes, 0–3 accumulating C, 4–5 holding A's rows, 6–7 B's columns.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#define VITREG_AMX_TARGET __attribute__((target("amx-tile,amx-int8,amx-bf16")))

namespace vitreg::amx {

struct alignas(64) TileConfig {
    std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};

// Every tile 16 rows × 64 bytes; this thread's until _tile_release().
VITREG_AMX_TARGET inline void configure() {
    TileConfig config;
    for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;
    _tile_loadconfig(&config);
}

// C tiles 0–3 += the 2 × 2 products of A tiles 4–5 and B tiles 6–7: tdpbf16ps (Bf16) or
// tdpbusd (uint8 A, int8 B).
template <bool Bf16>
VITREG_AMX_TARGET __attribute__((always_inline)) inline void products() {
    if constexpr (Bf16) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    } else {
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
    }
}

}  // namespace vitreg::amx
#endif
