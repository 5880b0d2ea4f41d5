#pragma once
// Reading PyTorch checkpoint files (.pth, .pt, .bin) as torch.save has written them since
// PyTorch 1.6: a zip archive holding <name>/data.pkl (the pickled object) and
// <name>/data/<key> (raw little-endian storages). The pickle runs on a restricted machine that
// knows only what a state dict needs and refuses every other global by name; nothing in the
// file is ever executed. Storages are read in place from the mapped file: a contiguous tensor
// is a view into it, a strided one (a transposed view saved as is) is gathered into a buffer
// the file owns. F64 tensors are rounded to F32 into such a buffer; integer and bool tensors
// (buffers such as position_ids) are skipped, as are entries that are not tensors.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.hpp"
#include "vitreg/tensor_file.hpp"

namespace vitreg {

struct TorchFileLimits {
    std::uint64_t max_pickle_bytes = 64ull << 20;  // data.pkl of a state dict is a few hundred KB
    std::size_t max_objects = 1u << 21;            // unpickled objects
    std::size_t max_memo = 1u << 21;               // memo entries
    std::size_t max_stack = 1u << 20;              // pickle stack entries and open marks, each
    std::size_t max_entries = 1u << 20;            // zip entries
    std::size_t max_tensors = 1u << 20;
    std::size_t max_rank = 16;
    // Bytes gathered into owned buffers (strided or F64 tensors) beyond the file's own size.
    std::uint64_t max_gathered_extra_bytes = 64ull << 20;
};

class TorchFile final : public TensorFile {
public:
    // Maps and reads `path`. `state_dict_key` is a dotted key path to the state dict
    // ("model", "model.state_dict"); empty: the top-level dict when it holds tensors, else the
    // first of `model`, `state_dict`, `teacher`, `module` that does (searched a few levels down).
    // A `module.` prefix on every name is dropped. Throws CheckpointError naming the file and
    // the fault; the legacy (pre-1.6) format and TorchScript archives are refused with how to
    // get a loadable file.
    explicit TorchFile(const std::string& path, const std::string& state_dict_key = "",
                       const TorchFileLimits& limits = {});
    TorchFile(const TorchFile&) = delete;
    TorchFile& operator=(const TorchFile&) = delete;

    const std::string& path() const override { return path_; }
    bool has(const std::string& name) const override;
    const TensorView& get(const std::string& name) const override;
    std::vector<std::string> names() const override;
    const std::map<std::string, std::string>& metadata() const override { return metadata_; }  // always empty
    void release(const TensorView& tensor) const override;

    // Where the state dict was found: "" (the top level), "model", "teacher", "model.state_dict"...
    const std::string& state_dict_key() const { return found_key_; }
    // Tensors left out because vitreg does not read their dtype ("pos_ids (LongStorage)").
    const std::vector<std::string>& skipped() const { return skipped_; }

private:
    void read(const std::string& state_dict_key, const TorchFileLimits& limits);

    std::string path_;
    MappedFile map_;
    std::map<std::string, TensorView> tensors_;
    std::map<std::string, std::string> metadata_;
    std::vector<std::unique_ptr<unsigned char[]>> owned_;
    std::string found_key_;
    std::vector<std::string> skipped_;
};

}  // namespace vitreg
