#pragma once
// A checkpoint on disk: a safetensors or PyTorch file (plus a sibling config.json for HF), its source
// (the format that wrote it), and the Config resolved from it. Hands out tensors by their canonical
// (dinov2) names; the sources only translate names (src/core/checkpoint/).
#include <memory>
#include <string>
#include <vector>

#include "vitreg/config.hpp"
#include "vitreg/precision.hpp"
#include "vitreg/tensor_file.hpp"

namespace vitreg {

namespace source {
struct NameTable;
}

// How much of a checkpoint is read: all of it, or (vitreg info) the header, configs and the few
// small tensors resolution reads, a truncated safetensors file's missing tensors listed unreadable.
enum class CheckpointRead { Whole, HeaderOnly };

// A quantized checkpoint (vitreg convert --dtype int8; docs/design.md, "Reduced precision"): the
// linears the forward quantizes at `precision` (the patch embedding's and each block's) stored as
// integers of `bits`, each beside its fp32 scales per output channel ("W" I8, "W.scale" F32).
// Its metadata says so: quantization=int8, weight_bits=8|7, and the source_digest it came from.
// Or int4 (--dtype int4): "W" U8 codes two to a byte beside "W.scale" and "W.zero" (BF16, per
// group of 128 inputs); quantization=int4, weight_bits=4, group_size=128.
struct WeightQuantization {
    Precision precision = Precision::Fp32;  // the one precision the file runs at
    int bits = 0;                           // 0: float weights
    bool quantized() const { return bits > 0; }
};

// One quantized weight: its integers as stored (in the mapped file; `view` to release once
// packed) and their per-output-channel scales.
struct Int8Tensor {
    const TensorView* view = nullptr;
    const std::int8_t* q = nullptr;  // [out, in...] row-major, within ±(2^(bits−1) − 1)
    std::vector<float> scale;        // [out], finite and positive
    std::vector<std::int32_t> sums;  // [out] each row's Σ q (stored beside it, or found while checking the range)
};

// One int4 weight (vitreg convert --dtype int4): its codes as stored, two to a byte, the even
// input in the low nibble (in the mapped file; `view` to release once packed), and its bf16
// scales and zero points per group of 128 inputs.
struct Int4Tensor {
    const TensorView* view = nullptr;
    const unsigned char* codes = nullptr;  // [out][ceil(in / 2)] U8, a row's padding nibble 0
    // [out, ceil(in / 128)] bf16 where they lie in the file: 2 bytes each, perhaps unaligned;
    // finite, the scales positive. `params` values each.
    const unsigned char* scale = nullptr;
    const unsigned char* zero = nullptr;
    std::size_t params = 0;
    std::vector<std::uint16_t> scales() const;  // copies, aligned
    std::vector<std::uint16_t> zeros() const;
};

// Rows of a bf16 weight where they lie in a mapped file: `rows` rows of pairs along k.
struct Bf16Rows {
    const std::uint32_t* pairs = nullptr;
    std::int64_t rows = 0;
};

class Checkpoint {
public:
    // `path`: a .safetensors or torch.save (.pth/.pt/.bin) file, or a folder holding
    // model.safetensors or pytorch_model.bin (+ config.json).
    explicit Checkpoint(const std::string& path, const ConfigOverrides& overrides = {},
                        CheckpointRead read = CheckpointRead::Whole);

    const Config& config() const { return config_; }
    const std::string& path() const { return file_->path(); }
    const TensorFile& file() const { return *file_; }
    // The file, for a model whose linears read their weights from it in place (mapped_bf16).
    std::shared_ptr<const TensorFile> shared_file() const { return file_; }
    // The stored names of the model's tensors (a two-tower file's vision tower and projection),
    // sorted: what config().parameters counts.
    const std::vector<std::string>& model_tensors() const { return model_tensors_; }

    // A bias stored in parts counts as present when any part is: the others are zero.
    bool has(const std::string& canonical) const;
    // The tensor(s) stored under a canonical name: one view, or several to be concatenated
    // along dim 0 (HF keeps query/key/value apart; a null view is a bias part left out, zero).
    // Throws CheckpointError when missing.
    std::vector<const TensorView*> parts(const std::string& canonical) const;
    // The tensor as float32 after checking its shape (concatenating parts; leading 1s may be
    // missing on disk, and a projection stored [E, D] is transposed to the canonical [D, E]).
    // Throws a CheckpointError naming the tensor, the expected and the stored shape.
    std::vector<float> load(const std::string& canonical, const std::vector<std::int64_t>& shape) const;
    // The same into `out` (resized): loading tensor after tensor into one buffer faults its
    // pages in once, not once per tensor (a 7B's fp32 copies are 27 GB in all).
    void load_into(const std::string& canonical, const std::vector<std::int64_t>& shape, std::vector<float>& out) const;
    // A linear weight's bf16 values in place in the file, as the pairs of its rows along k, one
    // entry per stored part in order (HF's query, key and value; DINOv3's w1 and w2): where each
    // part is a BF16 tensor of whole rows of `shape` [out, in...], 4-byte aligned, the flattened
    // in even, and the rows add up to out. Else empty (load converts it). Valid while the file is.
    std::vector<Bf16Rows> mapped_bf16(const std::string& canonical, const std::vector<std::int64_t>& shape) const;

    // How the weights are stored (quantization.cpp): float unless the metadata says quantized.
    const WeightQuantization& quantization() const { return quantization_; }
    // A quantized file's weight `canonical` (shape [out, in...]) and its "<canonical>.scale".
    // Throws CheckpointError naming the file and the tensor: a file not quantized, a weight not
    // I8 or of another shape, a scale missing, not F32 [out], not finite and positive, or an
    // integer past the file's weight_bits.
    Int8Tensor load_int8(const std::string& canonical, const std::vector<std::int64_t>& shape) const;
    // An int4 file's weight `canonical` of `shape` [out, in...] (in: the rest flattened), with its
    // "<canonical>.scale" and ".zero". Throws CheckpointError naming the file and the tensor: a
    // file not int4, codes not U8 of `shape` with its last dim halved (rounded up; an even last
    // dim where there are more than 2) or with a padding nibble set, a scale or zero missing, not
    // BF16 [out, ceil(in / 128)], not finite, or a scale not positive.
    Int4Tensor load_int4(const std::string& canonical, const std::vector<std::int64_t>& shape) const;

private:
    std::vector<std::string> source_names(const std::string& canonical) const;
    void apply_bias_mask(const TensorView& bias, float* values, std::size_t n) const;
    std::size_t checked_part(const TensorView& part, const std::vector<std::int64_t>& want) const;
    bool proj_transposed() const;
    Config resolve(const std::string& dir, const ConfigOverrides& overrides);  // src/core/checkpoint/resolve.cpp
    WeightQuantization read_quantization() const;  // src/core/checkpoint/quantization.cpp

    std::shared_ptr<TensorFile> file_;
    std::string prefix_;  // e.g. "dinov2." for HF task models
    // Canonical -> stored names: the source's table for this file (a few sources pick names from
    // the tensors; timm's CLIP head may stand for `proj`).
    std::shared_ptr<source::NameTable> names_;
    std::vector<std::string> model_tensors_;
    WeightQuantization quantization_;
    Config config_;
};

// A quantized file runs at the precision and weight width it was quantized for, nothing else (a
// float forward would need the original's weights, which the integers only approximate): throws
// UsageError naming the file and what it runs at. Float files run at any precision.
void refuse_other_precision(const Checkpoint& ck, const PrecisionOptions& precision);

// Finds a model given as a file, a folder, the name of a shipped checkpoint (searched in
// $VITREG_WEIGHTS, the source tree's weights/ and the installed share/vitreg/weights), a
// Hugging Face hub id "ORG/NAME[@REVISION]" (or "hf:ORG/NAME[@REVISION]") already in the local
// cache ($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub), or a torch hub name
// ("dinov2_vits14_reg4": $TORCH_HOME/hub/checkpoints/NAME_pretrain.pth or NAME.pth), or a timm
// name ("vit_so400m_patch14_siglip_224[.webli]", or timm:NAME; hf-hub:ORG/NAME as hf:) as
// timm.create_model finds it in the HF cache, timm/NAME.TAG (without a tag, the one cached). Nothing is
// downloaded: a name not in its cache is an error that says how to fetch it.
std::string resolve_model_path(const std::string& spec);
// Names of the shipped checkpoints found on the search path.
std::vector<std::string> shipped_models();

}  // namespace vitreg
