#pragma once
// PIL's own pixel conversions (Pillow 9.4, src/libImaging/Convert.c), exact to the integer:
// CMYK to RGB, and the alpha premultiplication its resize does on RGBA and LA images.
#include <cstdint>

namespace vitreg::pil {

inline int muldiv255(int a, int b) {  // round(a * b / 255), PIL's MULDIV255
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

inline std::uint8_t clip8(int v) { return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

// PIL's CMYK bands are ink amounts (libjpeg's Adobe CMYK inverted): nk = 255 - K, and each of
// R, G, B = clip8(nk - muldiv255(ink, nk)).
inline void cmyk_to_rgb(const std::uint8_t* cmyk, std::uint8_t* rgb) {
    const int nk = 255 - cmyk[3];
    for (int c = 0; c < 3; ++c) rgb[c] = clip8(nk - muldiv255(cmyk[c], nk));
}

// RGBA -> RGBa and LA -> La (the colour bands scaled by alpha, the last band), and back:
// alpha 0 and 255 leave the colour as it is, else clip8(255 * c / a) truncated.
inline void premultiply(std::uint8_t* px, int bands) {
    const int a = px[bands - 1];
    for (int c = 0; c < bands - 1; ++c) px[c] = static_cast<std::uint8_t>(muldiv255(px[c], a));
}
inline void unpremultiply(std::uint8_t* px, int bands) {
    const int a = px[bands - 1];
    if (a == 0 || a == 255) return;
    for (int c = 0; c < bands - 1; ++c) px[c] = clip8(255 * px[c] / a);
}

}  // namespace vitreg::pil
