// bf16 weights stored as bf16 run where they lie in the checkpoint's mapped pages (Linear::mapped):
// the input is packed as the GEMM's panels and the weights are the broadcast side. The products
// are vdpbf16ps' with the operands' roles swapped, so the features are the packed copy's, bit for
// bit; token counts here end in full, 16- and 32-wide last panels. A weight stored in parts runs
// in place part by part.
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

Model load_bf16(const std::string& path, bool packed) {
    PrecisionOptions bf16;
    bf16.precision = Precision::Bf16;
    bf16.bf16_packed = packed;
    return Model::load(path, {}, bf16);
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
    for (const std::string& file : files) {
        INFO(file);
        const Model mapped = load_bf16(file, false), packed = load_bf16(file, true);
        CHECK(packed.weight_bytes().mapped == 0);
        if (!gemm::bf16_in_place()) {  // AMX, or rounded operands through the fp32 kernels: packed
            CHECK(mapped.weight_bytes().mapped == 0);
            continue;
        }
        // Every linear in place; what is held is the biases.
        CHECK(mapped.weight_bytes().mapped > 0);
        CHECK(mapped.weight_bytes().mapped >= packed.weight_bytes().held / 2);
        CHECK(mapped.weight_bytes().held < packed.weight_bytes().held / 20);
        const int p = mapped.config().patch;
        for (const auto [batch, side] : {std::pair{1, 2}, {2, 3}, {3, 5}, {1, 7}}) {
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
}

TEST_CASE("packed bf16 weights are for bf16 only") {
    PrecisionOptions fp32;
    fp32.bf16_packed = true;
    CHECK_THROWS_WITH(Model::load(fixture("models/timm_reg2_bf16.safetensors"), {}, fp32),
                      Catch::Contains("--bf16-weights packed applies to --precision bf16 only (got fp32)"));
}
