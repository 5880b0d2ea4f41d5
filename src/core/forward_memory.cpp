#include "vitreg/forward_memory.hpp"

#include <tbb/info.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "kernels.hpp"
#include "parse_number.hpp"
#include "vitreg/config.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model.hpp"

namespace vitreg {

namespace {

constexpr std::int64_t kMiB = std::int64_t(1) << 20;

// The bytes a packed weight takes in the model's precision (bf16 without vdpbf16ps is packed as
// rounded floats).
std::int64_t weight_bytes(Precision p) {
    if (p == Precision::Int8) return 1;
    if (p == Precision::Bf16 && gemm::native_bf16()) return 2;
    return 4;
}

// The bytes of `count` packed weights: int4's codes take half a byte, and each group of 128 its
// bf16 scale and zero and its 16-bit Σ (q − 8).
std::int64_t weights_bytes(Precision p, std::int64_t count) {
    if (p == Precision::Int4) return count / 2 + (count + quant::kInt4Group - 1) / quant::kInt4Group * 6;
    return count * weight_bytes(p);
}

// The cgroup's memory limit (v2, then v1), or 0 where there is none to read.
std::int64_t cgroup_limit() {
    for (const char* file : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
        std::ifstream in(file);
        std::string text;
        if (!(in >> text) || text == "max") continue;
        if (const auto v = parse_integer(text, 1, std::numeric_limits<long>::max())) return *v;
    }
    return 0;
}

// Physical memory, capped by the cgroup's limit.
std::int64_t usable_memory() {
    const std::int64_t physical = std::int64_t(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
    const std::int64_t limit = cgroup_limit();
    return limit > 0 && limit < physical ? limit : physical;
}

}  // namespace

ForwardMemory forward_memory(const Config& c, Precision precision, std::int64_t tokens, int height, int width, int threads) {
    const std::int64_t D = c.dim, H = c.mlp_hidden, p = c.patch;
    const std::int64_t N = tokens, patches = (height / p) * std::int64_t(width / p);
    const bool swiglu = c.mlp == MlpKind::SwiGlu;
    ForwardMemory m;
    // Per block q|k|v, proj, fc1 (SwiGLU: both halves) and fc2; the patch embedding; positions.
    const std::int64_t per_block = 4 * D * D + (swiglu ? 3 : 2) * D * H;
    m.weights = weights_bytes(precision, c.depth * per_block + 3 * p * p * D) +
                std::int64_t(c.depth) * 8 * D * 4;  // norms, LayerScales, biases: fp32
    // Floats per token: x, its LayerNorm, q|k|v, the hidden rows (and SwiGLU's gated half or the
    // normed hidden), the GEMM's packed input (as wide as fc2's), the position table and the
    // features returned; plus the input pixels.
    const bool second_hidden = swiglu || c.mlp_norm;
    const std::int64_t per_token = D + D + 3 * D + (swiglu ? 2 * H : H) + (second_hidden ? H : 0) + H + D + D;
    m.activations = (N * per_token + patches * 3 * p * p) * 4;
    const bool key_blocks = kernels::attention_by_key_blocks(static_cast<int>(std::min<std::int64_t>(N, 1 << 30)), nullptr);
    const int t = threads > 0 ? threads : tbb::info::default_concurrency();
    const std::int64_t kv = 2 * N * D * (precision == Precision::Fp32 ? 4 : weight_bytes(Precision::Bf16));
    m.attention = kv + std::int64_t(t) * static_cast<std::int64_t>(kernels::attention_thread_bytes(
                                              static_cast<int>(std::min<std::int64_t>(N, 1 << 30)), c.head_dim, key_blocks));
    return m;
}

ForwardMemory forward_memory(const Model& model, int height, int width, int threads) {
    return forward_memory(model.config(), model.precision().precision, model.tokens(height, width), height, width, threads);
}

void refuse_what_cannot_fit(const std::string& model, const Config& c, Precision precision, std::int64_t cap, int threads,
                            bool quantized_file) {
    const int side = c.native_size();
    const std::int64_t tokens = c.prefix_tokens() + c.registers + std::int64_t(c.grid) * c.grid;
    const auto need = [&](Precision p) { return forward_memory(c, p, tokens, side, side, threads); };
    const ForwardMemory here = need(precision);
    if (here.total() <= cap) return;
    std::string each, fits;
    for (const auto& named : EnumTable<Precision>::names) {
        const std::int64_t total = need(named.value).total();
        each += std::string(each.empty() ? "" : ", ") + named.name + " " + format_bytes(total);
        if (fits.empty() && total <= cap)
            fits = quantized_file ? std::string("its source converted with vitreg convert --dtype ") + named.name + " would fit"
                                  : model + "@" + named.name + " would fit";
    }
    throw UsageError(model + ": one " + std::to_string(side) + "x" + std::to_string(side) + " image at " + to_string(precision) +
                     " needs about " + format_bytes(here.total()) + " (weights " + format_bytes(here.weights) + ", activations " +
                     format_bytes(here.activations + here.attention) + ", margin " + format_bytes(here.margin) +
                     "), over the memory cap of " + format_bytes(cap) + " (--max-memory); nothing was loaded. By precision: " +
                     each + "; " + (fits.empty() ? "none fits this cap" : fits));
}

std::int64_t default_memory_cap() { return usable_memory() / 4 * 3; }

std::int64_t parse_memory_size(const std::string& text, const std::string& option) {
    const auto refuse = [&](const std::string& why) {
        return UsageError(option + " " + text + ": " + why +
                          " (a size like 4G, 512M or 1500000000 bytes, or a share of the memory like 60%)");
    };
    std::size_t digits = 0;
    while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) ++digits;
    const auto number = parse_real(text.substr(0, digits), 0.0, 1e30);
    if (!number) throw refuse("not a number");
    std::string unit = text.substr(digits);
    double bytes = 0;
    if (unit == "%") {
        if (*number <= 0 || *number > 100) throw refuse("a share must be in (0, 100]%");
        bytes = *number / 100 * static_cast<double>(usable_memory());
    } else {
        // "4G", "4GB", "4GiB" alike: one unit letter, then B or iB at most.
        for (const std::string tail : {"iB", "B"})
            if (unit.size() == 1 + tail.size() && unit.compare(1, std::string::npos, tail) == 0) unit.resize(1);
        int power = 0;
        if (unit.size() == 1) {
            const std::size_t at = std::string("KMGT").find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
            if (at == std::string::npos) throw refuse("unknown unit '" + text.substr(digits) + "'");
            power = static_cast<int>(at) + 1;
        } else if (!unit.empty()) {
            throw refuse("unknown unit '" + text.substr(digits) + "'");
        }
        bytes = *number * std::pow(1024.0, static_cast<double>(power));
    }
    if (bytes < static_cast<double>(kMiB)) throw refuse("under 1 MiB");
    if (bytes > 9e18) throw refuse("too large");
    return static_cast<std::int64_t>(bytes);
}

std::string format_bytes(std::int64_t bytes) {
    char text[32];
    if (bytes >= (std::int64_t(10) << 30)) std::snprintf(text, sizeof text, "%.0f GB", bytes / 1073741824.0);
    else if (bytes >= (std::int64_t(1) << 30)) std::snprintf(text, sizeof text, "%.1f GB", bytes / 1073741824.0);
    else std::snprintf(text, sizeof text, "%.0f MB", bytes / 1048576.0);
    return text;
}

}  // namespace vitreg
