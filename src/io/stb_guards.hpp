#pragma once
// Checks on the bytes of an image before Debian's stb_image 2.27 sees them, for faults that
// fuzz_image found in that version (fixed upstream in 2.28):
//  - a JPEG Huffman table (DHT) declaring more than 256 codes overruns stb's fixed tables;
//  - a PNM header number with too many digits overflows stb's int parser (undefined behaviour);
//  - a 16-bit PNM (maximum value > 255) overruns the buffer stb sizes for 8 bits.
// Files of other formats pass untouched.
#include <cstddef>
#include <cstdint>
#include <string>

namespace vitreg {

// Throws ImageError naming `name` and the fault.
void check_before_stb(const std::uint8_t* data, std::size_t size, const std::string& name);

}  // namespace vitreg
