// Weights stored in the precision that runs (bf16 ones at bf16, an int8 or int4 file's) run where
// they lie in the checkpoint's mapped pages (Linear::mapped): the input is packed as the GEMM's
// panels and the weights are the broadcast side. The products are vdpbf16ps' or vpdpbusd's with
// the operands' roles swapped, so the features are the packed copy's, bit for bit; token counts
// here end in full, 32- and joined 64-wide last panels. A weight stored in parts runs in place
// part by part.
#include <catch2/catch.hpp>
#include <cmath>

#include "gemm_lowp.hpp"
#include "test_support.hpp"
#include "vitreg/canonical_checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

Model load_as(const std::string& path, Precision precision, bool packed, int int8_bits) {
    PrecisionOptions p;
    p.precision = precision;
    p.file_weights_packed = packed;
    p.int8_weight_bits = int8_bits;
    return Model::load(path, {}, p);
}

// `file` at `precision` in place and packed: every linear in place where the CPU allows (what is
// held is the biases, and int8's scales and sums), and the same features at batches 1–3 (at
// 2 × 52 tokens a last token tile of 8 joins the one before it).
void check_in_place(const std::string& file, Precision precision, bool in_place, int int8_bits = 8) {
    INFO(file);
    const Model mapped = load_as(file, precision, false, int8_bits), packed = load_as(file, precision, true, int8_bits);
    CHECK(packed.weight_bytes().mapped == 0);
    if (!in_place) {  // AMX, or kernels without the instruction: packed
        CHECK(mapped.weight_bytes().mapped == 0);
        return;
    }
    CHECK(mapped.weight_bytes().mapped > 0);
    if (precision != Precision::Int4) {  // (int4: the linears whose width is a multiple of 128)
        CHECK(mapped.weight_bytes().mapped >= packed.weight_bytes().held / 2);
        CHECK(mapped.weight_bytes().held < packed.weight_bytes().held / 4);
    }
    const int p = mapped.config().patch;
    for (const auto [batch, side] : {std::pair{1, 2}, {2, 3}, {3, 5}, {1, 7}, {2, 7}}) {
        const int n = side * p;
        INFO("batch " << batch << " at " << n << " px: " << batch * mapped.tokens(n, n) << " tokens");
        std::vector<float> x(static_cast<std::size_t>(batch) * 3 * n * n);  // smooth, a different image each
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i % 101)) + 0.01f * (i / (3 * n * n));
        const Features a = mapped.forward(x.data(), batch, n, n), b = packed.forward(x.data(), batch, n, n);
        CHECK(a.cls == b.cls);
        CHECK(a.patches == b.patches);
        CHECK(a.reg_tokens == b.reg_tokens);
        CHECK(a.embedding == b.embedding);
    }
}

}  // namespace

TEST_CASE("bf16 weights read in place give the packed copy's features, bit for bit") {
    TempDir dir;
    // bf16 files as shipped: timm's, and HF DINOv3's with q, k, v and gate, up stored apart (the
    // linear's rows in parts); bf16 conversions of a CLIP (QuickGELU) and a SwiGLU model.
    std::vector<std::string> files{fixture("models/timm_reg2_bf16.safetensors"), fixture("models/hf_dinov3_gated")};
    for (const char* source : {"models/hf_clip", "models/hf_swiglu"}) {
        files.push_back(dir / (std::string(source).substr(7) + "-bf16.safetensors"));
        convert_checkpoint(fixture(source), {}, DType::BF16, files.back());
    }
    for (const std::string& file : files) check_in_place(file, Precision::Bf16, gemm::bf16_in_place());
}

TEST_CASE("an int8 file's weights read in place give the packed copy's features, bit for bit") {
    TempDir dir;
    // int8 conversions (8- and 7-bit weights) of a CLIP (QuickGELU), a SwiGLU model, HF DINOv3
    // (q, k, v and gate, up stored apart) and timm's registers.
    int i = 0;
    for (const char* source : {"models/hf_clip", "models/hf_swiglu", "models/hf_dinov3_gated", "models/timm_reg2_bf16.safetensors"}) {
        const std::string file = dir / ("int8-" + std::to_string(i++) + ".safetensors");
        const int bits = i % 2 ? 8 : 7;
        convert_checkpoint(fixture(source), {}, DType::F32, file, WeightQuantization{Precision::Int8, bits});
        check_in_place(file, Precision::Int8, gemm::int8_in_place(), bits);
    }
}

TEST_CASE("an int4 file's weights read in place give the packed copy's features, bit for bit") {
    // The shipped ViT-S-shaped model: its MLP's second linear (768 wide) runs in place, the
    // others (192 and 588 wide, not multiples of 128) packed, in one forward.
    TempDir dir;
    const std::string file = dir / "int4.safetensors";
    convert_checkpoint(resolve_model_path("vitreg-untrained-s14-d192-reg4"), {}, DType::F32, file,
                       WeightQuantization{Precision::Int4, 4});
    check_in_place(file, Precision::Int4, gemm::int8_in_place());
}

TEST_CASE("packed file weights are for bf16, int8 and int4 only") {
    PrecisionOptions fp32;
    fp32.file_weights_packed = true;
    CHECK_THROWS_WITH(Model::load(fixture("models/timm_reg2_bf16.safetensors"), {}, fp32),
                      Catch::Contains("--file-weights packed applies to --precision bf16, int8 and int4 only (got fp32)"));
}
