#include <cstring>
#include <nlohmann/json.hpp>

#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

std::string safetensors_header_in_order(const std::vector<std::pair<std::string, ArrayRef>>& tensors,
                                        const std::map<std::string, std::string>& metadata) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::size_t offset = 0;
    for (const auto& [name, a] : tensors) {
        if (header.contains(name)) throw Error("safetensors header: tensor '" + name + "' twice");
        const std::size_t bytes = a.numel() * dtype_size(a.dtype);
        header[name] = {{"dtype", to_string(a.dtype)}, {"shape", a.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<std::uint64_t>(h.size()) >> (8 * i)) & 0xff);
    return out + h;
}

std::string safetensors_header(const std::map<std::string, ArrayRef>& tensors,
                               const std::map<std::string, std::string>& metadata) {
    return safetensors_header_in_order(std::vector<std::pair<std::string, ArrayRef>>(tensors.begin(), tensors.end()), metadata);
}

std::string safetensors_bytes(const std::map<std::string, ArrayRef>& tensors,
                              const std::map<std::string, std::string>& metadata) {
    std::string out = safetensors_header(tensors, metadata);
    for (const auto& [name, a] : tensors) out += array_bytes(a);
    return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, ArrayRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

}  // namespace vitreg
