#pragma once
// The header of a .npy array (format 1, 2 or 3) as `vitreg extract` and NumPy write it: little-endian
// float32, C order. The reader of feature arrays to index; fuzzed (fuzz target "index").
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vitreg {

struct NpyHeader {
    std::vector<std::int64_t> shape;
    std::size_t data_offset = 0;  // where the elements begin
};

// UsageError "PATH: ..." for anything but a '<f4', C-order array with a shape of at most 8
// dimensions, each in 0..2^40.
NpyHeader parse_npy_header(const unsigned char* bytes, std::size_t size, const std::string& path);

}  // namespace vitreg
