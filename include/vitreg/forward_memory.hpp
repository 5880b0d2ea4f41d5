#pragma once
// What one image's forward holds in memory at an input size, estimated from the model's shape,
// and the cap it may use (--max-memory): the default --max-tokens refuses an input whose
// estimate exceeds the cap (docs/design.md, "Dense features at resolution").
#include <cstdint>
#include <string>

#include "vitreg/precision.hpp"

namespace vitreg {

class Model;
struct Config;

// What the process holds beside the estimate's parts: its code and libraries, thread stacks,
// the allocator's slack and the mapped pages of the tensor being converted.
constexpr std::int64_t kMemoryMargin = std::int64_t(64) << 20;  // the process alone measures ~58 MB

// Bytes, by what holds them. An estimate of the peak resident set, not an accounting of every
// allocation: the model's weights, one image's activations (the residual stream, its LayerNorm,
// q|k|v, the MLP's hidden rows, the GEMM's packed input, the input pixels, the position table
// and the features returned) and the attention's packed keys and values plus each thread's
// score block; plus a fixed margin (kMemoryMargin).
struct ForwardMemory {
    std::int64_t weights = 0, activations = 0, attention = 0, margin = kMemoryMargin;
    std::int64_t total() const { return weights + activations + attention + margin; }
};

// The estimate for one image of height × width pixels making `tokens` tokens, of a model shaped
// `c` whose linears run at `precision`, on `threads` threads (0 = all cores).
ForwardMemory forward_memory(const Config& c, Precision precision, std::int64_t tokens, int height, int width,
                             int threads = 0);
// A loaded model's (its test-time registers counted among the tokens).
ForwardMemory forward_memory(const Model& model, int height, int width, int threads = 0);

// Refuses, before anything is loaded, a model whose forward of one image at its native size would
// not fit `cap` at `precision`: a UsageError naming `model`, its estimate at each precision and
// the precision that would fit. A quantized file runs at its own precision only
// (`quantized_file`): the smaller one that would fit is named as a conversion of its source.
void refuse_what_cannot_fit(const std::string& model, const Config& c, Precision precision, std::int64_t cap,
                            int threads = 0, bool quantized_file = false);

// The memory a process may use by default: 75% of the physical memory, or of the cgroup's
// limit where that is lower.
std::int64_t default_memory_cap();

// "4G", "512M", "1.5G", "300K", "1000000" (bytes; K, M, G, T are powers of 1024, an optional B
// or iB after them) or "60%" (of the physical memory or cgroup limit). Throws UsageError naming
// `option` for anything else, or for a size under 1 MiB.
std::int64_t parse_memory_size(const std::string& text, const std::string& option = "--max-memory");

// "512 MB", "3.2 GB": a size for messages.
std::string format_bytes(std::int64_t bytes);

}  // namespace vitreg
