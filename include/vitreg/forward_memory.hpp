#pragma once
// What one image's forward holds in memory at an input size, estimated from the model's shape,
// and the cap it may use (--max-memory): the default --max-tokens refuses an input whose
// estimate exceeds the cap (docs/design.md, "Dense features at resolution").
#include <cstdint>
#include <string>

namespace vitreg {

class Model;

// Bytes, by what holds them. An estimate of the peak resident set, not an accounting of every
// allocation: the model's weights, one image's activations (the residual stream, its LayerNorm,
// q|k|v, the MLP's hidden rows, the GEMM's packed input, the input pixels, the position table
// and the features returned) and the attention's packed keys and values plus each thread's
// score block.
struct ForwardMemory {
    std::int64_t weights = 0, activations = 0, attention = 0;
    std::int64_t total() const { return weights + activations + attention; }
};

// The estimate for one image of height × width pixels on `threads` threads (0 = all cores).
ForwardMemory forward_memory(const Model& model, int height, int width, int threads = 0);

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
