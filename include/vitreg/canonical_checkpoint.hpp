#pragma once
// Any readable checkpoint in vitreg's own layout: the dinov2 / timm canonical tensor names, and
// in __metadata__ what names cannot say (heads, family, activation, attention, resampling,
// preprocessing). What `vitreg convert` and `vitreg calibrate-sink` write; it loads back to the
// same configuration and the same features.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vitreg/checkpoint.hpp"

namespace vitreg {

struct CanonicalWrite {
    DType dtype = DType::F32;  // of every tensor but quantized weights and their scales
    // quantized(): the weights the forward quantizes at that precision stored quantized (the patch
    // embedding's and each block's linears; an attention-pool head stays float), each with its
    // "W.scale" (F32), and quantization / weight_bits in the metadata (see WeightQuantization).
    WeightQuantization quantization;
    // Per-head sink logits [depth * heads] to store (attention=sink); unset: the checkpoint's own.
    std::optional<std::vector<float>> sinks;
    // Added to the metadata of the resolved configuration, replacing what it says.
    std::map<std::string, std::string> metadata;
};

// The resolved configuration `c` (as the forward runs it: overrides included) of `ck`'s weights,
// written atomically to `out`. Classifier heads are left out. Throws UsageError for sink
// logits of the wrong count, IoError when writing fails.
void write_canonical_checkpoint(const Checkpoint& ck, const Config& c, const CanonicalWrite& write, const std::string& out);

// `vitreg convert`: the checkpoint at `path` (any family, layout or file format) as `dtype`, with
// provenance in the metadata: source (the file name), source_digest, source_layout and
// converted_by. `quantization` (--dtype int8: Int8 of 8 or 7 bits, with dtype F32) stores the
// weights as the int8 forward packs them: the file then loads only at int8, to the same features
// as the source at int8, bit for bit. Throws UsageError for a source quantized already. Returns
// the configuration written.
Config convert_checkpoint(const std::string& path, const ConfigOverrides& overrides, DType dtype, const std::string& out,
                          const WeightQuantization& quantization = {});

}  // namespace vitreg
