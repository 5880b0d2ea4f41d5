#pragma once
// Output files, each written to a temporary name in the target folder and renamed into
// place, so a reader never sees a half-written file.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vitreg/tensor_file.hpp"

namespace vitreg {

// A file written piece by piece under a temporary name beside `path` and renamed into place by
// commit() (after fsync); destroyed uncommitted, it leaves nothing behind. Throws IoError.
// `direct`: for files of gigabytes written once, past the page cache (O_DIRECT, staged through an
// aligned buffer) where the file system allows it, buffered where it does not.
class AtomicFile {
public:
    explicit AtomicFile(std::string path, bool direct = false);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;
    void write(const void* data, std::size_t size);
    void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }
    void commit();

private:
    void write_out(const char* p, std::size_t size);
    void stop_direct();
    std::string path_, tmp_;
    int fd_ = -1;
    bool direct_ = false;
    char* stage_ = nullptr;  // direct: the bytes not yet written, up to kStage
    std::size_t staged_ = 0;
};

// Writes `bytes` to `path` atomically (temp file, fsync, rename). Throws IoError.
void write_file_atomic(const std::string& path, const std::string& bytes);

// A float32 array to be written: shape and row-major data, stored as `dtype` (F16 and BF16
// round to nearest even; .npy has no BF16; I8, a quantized checkpoint's weights, takes floats
// that are integers in [-128, 127], U8 (an int4 file's codes, two to a byte) ones in [0, 255] and
// I32 (int8 weights' row sums) ones of magnitude below 2^24; each throws Error for any other).
struct ArrayRef {
    std::vector<std::int64_t> shape;
    const float* data = nullptr;
    DType dtype = DType::F32;
    std::size_t numel() const {
        std::size_t n = 1;
        for (auto s : shape) n *= static_cast<std::size_t>(s);
        return n;
    }
};

// The element bytes of an array: float32, float16 or bfloat16 rounded to nearest even, or integers.
std::string array_bytes(const ArrayRef& array);

// The header of a NumPy .npy file (format 1.0, '<f4' or '<f2', C order) for the array's shape;
// the element bytes follow it. `data` is not read.
std::string npy_header(const ArrayRef& array);
// The bytes of a NumPy .npy file: header and elements.
std::string npy_bytes(const ArrayRef& array);
void write_npy(const std::string& path, const ArrayRef& array);

// The length prefix and JSON header of a safetensors file whose tensors (F32 / F16, data
// sections in name order) have these shapes; their element bytes follow. `data` is not read.
std::string safetensors_header(const std::map<std::string, ArrayRef>& tensors,
                               const std::map<std::string, std::string>& metadata = {});
// The same with the data sections in the order given (a writer that streams tensors as it makes
// them); a name given twice throws Error.
std::string safetensors_header_in_order(const std::vector<std::pair<std::string, ArrayRef>>& tensors,
                                        const std::map<std::string, std::string>& metadata = {});
// The bytes of a safetensors file holding F32 / F16 tensors (sorted by name) and string metadata.
std::string safetensors_bytes(const std::map<std::string, ArrayRef>& tensors,
                              const std::map<std::string, std::string>& metadata = {});
void write_safetensors(const std::string& path, const std::map<std::string, ArrayRef>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// An 8-bit RGB image [height, width, 3] as PNG, written atomically.
void write_png_rgb(const std::string& path, int width, int height, const std::uint8_t* rgb);

// mkdir -p; throws IoError naming the folder.
void make_dirs(const std::string& path);
// The entries of a folder, sorted, without . and .. ([] when it cannot be read).
std::vector<std::string> list_dir(const std::string& dir);

}  // namespace vitreg
