#include "search/npy_header.hpp"

#include <regex>

#include "vitreg/error.hpp"

namespace vitreg {

NpyHeader parse_npy_header(const unsigned char* bytes, std::size_t size, const std::string& path) {
    static const char magic[] = "\x93NUMPY";
    if (size < 10 || std::string(reinterpret_cast<const char*>(bytes), 6) != std::string(magic, 6))
        throw UsageError(path + ": not a .npy array");
    const int major = bytes[6];
    std::size_t length = 0, start = 10;
    if (major == 1) {
        length = bytes[8] | static_cast<std::size_t>(bytes[9]) << 8;
    } else if (major == 2 || major == 3) {
        if (size < 12) throw UsageError(path + ": truncated .npy header");
        length = bytes[8] | static_cast<std::size_t>(bytes[9]) << 8 | static_cast<std::size_t>(bytes[10]) << 16 |
                 static_cast<std::size_t>(bytes[11]) << 24;
        start = 12;
    } else {
        throw UsageError(path + ": unsupported .npy version " + std::to_string(major));
    }
    if (length > size - start || length > (1u << 16)) throw UsageError(path + ": truncated .npy header");
    const std::string header(reinterpret_cast<const char*>(bytes) + start, length);
    static const std::regex descr(R"('descr'\s*:\s*'([^']*)')"), order(R"('fortran_order'\s*:\s*(True|False))"),
        shape(R"('shape'\s*:\s*\(([0-9,\s]*)\))");
    std::smatch d, o, s;
    if (!std::regex_search(header, d, descr) || !std::regex_search(header, o, order) || !std::regex_search(header, s, shape))
        throw UsageError(path + ": malformed .npy header");
    if (d[1] != "<f4") throw UsageError(path + ": holds '" + d[1].str() + "', not float32 ('<f4')");
    if (o[1] != "False") throw UsageError(path + ": is in Fortran order, not C order");
    NpyHeader h;
    static const std::regex number("[0-9]+");
    const std::string dims = s[1];
    for (auto it = std::sregex_iterator(dims.begin(), dims.end(), number); it != std::sregex_iterator(); ++it) {
        if (it->length() > 13 || h.shape.size() >= 8) throw UsageError(path + ": .npy shape out of range");
        h.shape.push_back(std::stoll(it->str()));
        if (h.shape.back() > (std::int64_t(1) << 40)) throw UsageError(path + ": .npy shape out of range");
    }
    h.data_offset = start + length;
    return h;
}

}  // namespace vitreg
