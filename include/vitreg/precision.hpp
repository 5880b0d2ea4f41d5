#pragma once
// How the forward computes (docs/design.md, "Reduced precision"): fp32; bf16 GEMMs (fp32
// accumulation, LayerNorm, normalizers, GELU and the residual stream in fp32); or int8 W8A8 linears
// (weights symmetric per output channel, activations uint8 per token or per tensor) with bf16
// attention matmuls; or int4 weights (W4A8: affine per group of 128 inputs, torchao's
// Int4WeightOnlyConfig rule, run as int8 linears group by group). Chosen when a model is loaded:
// weights are packed once, for one precision.
#include <map>
#include <string>
#include <vector>

#include "vitreg/enum_names.hpp"

namespace vitreg {

enum class Precision { Fp32, Bf16, Int8, Int4 };
// int8 activations: per token (dynamic, ONNX Runtime's DynamicQuantizeLinear rule per row), or
// per tensor (static ranges from `vitreg calibrate-int8`, one per linear).
enum class ActQuant { PerToken, PerTensor };

template <>
struct EnumTable<Precision> {
    static constexpr const char* what = "precision";
    static constexpr EnumName<Precision> names[] = {
        {Precision::Fp32, "fp32"}, {Precision::Bf16, "bf16"}, {Precision::Int8, "int8"},
        {Precision::Int4, "int4"}};
};
template <>
struct EnumTable<ActQuant> {
    static constexpr const char* what = "activation quantization";
    static constexpr EnumName<ActQuant> names[] = {{ActQuant::PerToken, "per-token"}, {ActQuant::PerTensor, "per-tensor"}};
};

Precision parse_precision(const std::string& s);  // "fp32" | "bf16" | "int8" | "int4"; throws UsageError
std::string to_string(Precision p);
ActQuant parse_act_quant(const std::string& s);  // "per-token" | "per-tensor"; throws UsageError
std::string to_string(ActQuant a);

// The observed range of one linear's input over the calibration images.
struct ActivationRange {
    float min = 0.0f, max = 0.0f;
};

// What `vitreg calibrate-int8` writes: the input range of every linear, by its checkpoint name
// ("patch_embed.proj", "blocks.3.attn.qkv", "blocks.3.mlp.fc2", ...).
struct Int8Calibration {
    std::string model;                // the checkpoint calibrated
    std::string method = "minmax";    // "minmax" | "percentile"
    double percentile = 100.0;        // the upper percentile taken (the lower is 100 − it)
    std::vector<std::string> images;  // the calibration images
    std::map<std::string, ActivationRange> ranges;
};

// Throws IoError naming the file and the fault (unreadable, not JSON, wrong format, a range
// that is not finite or has min > max).
Int8Calibration read_int8_calibration(const std::string& path);
// Written atomically (temporary name, then rename).
void write_int8_calibration(const std::string& path, const Int8Calibration& calibration);

// The instruction set the kernels of `p` run on this CPU, e.g. "avx512-vnni" (int8: for weights
// of `int8_weight_bits`).
std::string kernel_isa(Precision p, int int8_weight_bits = 8);

struct PrecisionOptions {
    Precision precision = Precision::Fp32;
    ActQuant act_quant = ActQuant::PerToken;  // int8 only
    std::string scales;                       // SCALES.json, for act_quant PerTensor
    // int8 weights: 8 bits (q in ±127), or 7 (q in ±63: ONNX Runtime's reduce_range). 7 bits let
    // a CPU without VNNI run vpmaddubsw exactly (two u8 × s7 products never saturate 16 bits);
    // with 8 it runs the exact but slower vpmaddwd emulation. The same numbers on every CPU.
    int int8_weight_bits = 8;
    // Weights the file stores in the precision that runs (bf16 ones at bf16 on AVX512-BF16, an
    // int8 or int4 file's on AVX512-VNNI; not where AMX runs them): `mapped` runs them where they lie in
    // the checkpoint's pages (loads in a fraction of a second, shares the page cache); `packed`
    // copies them into the GEMM's panels at load (3–10% faster per forward at small
    // token counts). The same features either way, bit for bit.
    bool file_weights_packed = false;

    // Throws UsageError for contradictions: per-tensor without int8 or without scales, scales
    // without per-tensor, 7-bit weights without int8, weight bits other than 7 or 8, packed file
    // weights at fp32.
    void validate() const;
    // "fp32", "bf16", "int8 per-token", "int8 per-tensor (SCALES.json)", with ", 7-bit weights"
    // where they are: for outputs and reports.
    std::string describe() const;
};

}  // namespace vitreg
