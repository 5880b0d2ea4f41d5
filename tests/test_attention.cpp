// The normalizers against the exact values of docs/design.md, "Attention normalizers", and their
// invariants; attention over key blocks against whole rows.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/attention.hpp"
#include "core/kernels.hpp"

using namespace vitreg;

TEST_CASE("softmax-1 of [2, 5, 3] matches the documented values") {
    std::vector<float> z{2, 5, 3};
    const float null_mass = normalize_attention(z.data(), z.size(), AttentionKind::Softmax1);
    CHECK(z[0] == Approx(0.041773).margin(1e-6));
    CHECK(z[1] == Approx(0.839025).margin(1e-6));
    CHECK(z[2] == Approx(0.113550).margin(1e-6));
    CHECK(z[0] + z[1] + z[2] == Approx(0.994347).margin(1e-6));
    CHECK(null_mass == Approx(1.0 - 0.994347).margin(1e-6));
}

TEST_CASE("sink logit 1.5 matches the documented values and abstention is 1 - sum p") {
    std::vector<float> z{2, 5, 3};
    const float null_mass = normalize_attention(z.data(), z.size(), AttentionKind::Sink, 1.5f);
    CHECK(z[0] == Approx(0.040966).margin(1e-6));
    CHECK(z[1] == Approx(0.822829).margin(1e-6));
    CHECK(z[2] == Approx(0.111358).margin(1e-6));
    CHECK(null_mass == Approx(0.024847).margin(1e-6));
    CHECK(null_mass == Approx(1.0 - (z[0] + z[1] + z[2])).margin(1e-6));
}

TEST_CASE("softmax sums to one and never abstains") {
    std::vector<float> z{-3, 0.5f, 7, 2};
    CHECK(normalize_attention(z.data(), z.size(), AttentionKind::Softmax) == 0.0f);
    CHECK(std::accumulate(z.begin(), z.end(), 0.0f) == Approx(1.0f).margin(1e-6));
}

TEST_CASE("stable form: huge scores neither overflow nor shift the constant 1") {
    // With scores far above 0, softmax-1 is nearly softmax; far below, nearly all abstains.
    std::vector<float> hi{1000, 1001};
    const float h = normalize_attention(hi.data(), hi.size(), AttentionKind::Softmax1);
    CHECK(std::isfinite(hi[0]));
    CHECK(h == Approx(0.0f).margin(1e-6));
    CHECK(hi[1] == Approx(1.0 / (1.0 + std::exp(-1.0))).margin(1e-5));
    std::vector<float> lo{-1000, -1001};
    const float l = normalize_attention(lo.data(), lo.size(), AttentionKind::Softmax1);
    CHECK(l == Approx(1.0f).margin(1e-6));  // the known-wrong variant (1 shifted by the max) gives ~0.21
    // A sink logit above every score dominates the same way.
    std::vector<float> z{0, 0};
    CHECK(normalize_attention(z.data(), z.size(), AttentionKind::Sink, 50.0f) == Approx(1.0f).margin(1e-6));
}

TEST_CASE("the normalizer's exp is within a few ulp of double precision over a row's whole range") {
    // Rows of 261 and 1374 scores (ViT-S at 224 and 518 px), spread from 0 down past the
    // e^-87 flush, against the same normalization computed in double.
    for (const std::size_t n : {std::size_t{261}, std::size_t{1374}}) {
        std::vector<float> z(n);
        // In double, then rounded: the same scores whether or not the compiler fuses a multiply-add.
        for (std::size_t i = 0; i < n; ++i) z[i] = static_cast<float>(3.0 - 0.07 * static_cast<double>(i * 7 % n));
        std::vector<double> e(n);
        double sum = 0;
        // The argument z - max is rounded to float as the kernel rounds it (at z - max = -65 that
        // alone moves e^x by up to 4e-6): what is measured is the exp and the normalization.
        const float m = *std::max_element(z.begin(), z.end());
        for (std::size_t i = 0; i < n; ++i) sum += e[i] = std::exp(static_cast<double>(z[i] - m));
        for (const auto kind : {AttentionKind::Softmax, AttentionKind::Softmax1}) {
            std::vector<float> p = z;
            const double denom = sum + (kind == AttentionKind::Softmax1 ? std::exp(-m) : 0.0);
            normalize_attention(p.data(), n, kind);
            double worst = 0;
            for (std::size_t i = 0; i < n; ++i) {
                const double want = e[i] / denom;
                if (want > 1e-30) worst = std::max(worst, std::abs(p[i] - want) / want);
            }
            CHECK(worst < 1e-6);
        }
    }
}

TEST_CASE("a NaN score gives NaN probabilities, not undefined behaviour") {
    // A broken checkpoint can make NaN scores; the sanitized build checks that nothing is UB.
    std::vector<float> z{1.0f, std::numeric_limits<float>::quiet_NaN(), -2.0f};
    normalize_attention(z.data(), z.size(), AttentionKind::Softmax);
    CHECK(std::isnan(z[1]));
    std::vector<float> inf{std::numeric_limits<float>::infinity(), 0.0f};
    normalize_attention(inf.data(), inf.size(), AttentionKind::Softmax1);
    CHECK(std::isnan(inf[0]));
}

namespace {

// One layer's attention through kernels::attention on the path asked for: the mixed output and
// each query's abstention.
struct AttentionRun {
    std::vector<float> out, abstention;
};

AttentionRun run_attention(const std::vector<float>& qkv, int tokens, int heads, int head_dim, AttentionKind kind,
                           const Eigen::VectorXf& sinks, const std::uint8_t* evicted, kernels::AttentionPath path) {
    AttentionRun r{std::vector<float>(static_cast<std::size_t>(tokens) * heads * head_dim),
                   std::vector<float>(static_cast<std::size_t>(tokens) * heads)};
    kernels::AttentionScratch scratch;
    kernels::AttentionRecord record;
    record.abstention = r.abstention.data();
    kernels::attention(qkv.data(), 1, tokens, heads, head_dim, kind, sinks, r.out.data(), scratch, false, &record,
                       evicted, path);
    return r;
}

// ‖a − b‖ / ‖b‖ over every element.
double l2_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
        norm += static_cast<double>(b[i]) * b[i];
    }
    return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("attention over key blocks (online softmax) equals whole rows", "[attention]") {
    // docs/design.md, "Attention normalizers": the running maximum and sum start at the virtual
    // key (logit 0 for softmax-1, s for a sink), so every normalizer and eviction gives the same
    // output and abstention as normalizing whole rows (‖Δ‖ / ‖whole‖ < 1e-6; element by element
    // the two differ by float rounding of a weighted sum). 4133 tokens spans 11 key blocks, the last
    // one partial; 1 and 257 tokens one block.
    const int heads = 2, head_dim = 32;
    Eigen::VectorXf sinks(heads);
    sinks << 2.0f, -1.0f;
    for (const int tokens : {1, 257, 4133}) {
        std::mt19937 rng(tokens);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> qkv(static_cast<std::size_t>(tokens) * 3 * heads * head_dim);
        for (float& v : qkv) v = 2.5f * normal(rng);  // peaked rows: logits spread over ~±15
        std::vector<std::uint8_t> evicted(static_cast<std::size_t>(heads) * tokens, 0);
        for (int h = 0; h < heads; ++h)
            for (int k = 0; k < tokens; ++k) evicted[static_cast<std::size_t>(h) * tokens + k] = k % 7 == 3 || k == 5 + h;
        for (const auto kind : {AttentionKind::Softmax, AttentionKind::Softmax1, AttentionKind::Sink})
            for (const bool evict : {false, true}) {
                CAPTURE(tokens, to_string(kind), evict);
                const std::uint8_t* mask = evict ? evicted.data() : nullptr;
                const auto whole = run_attention(qkv, tokens, heads, head_dim, kind, sinks, mask,
                                                 kernels::AttentionPath::WholeRows);
                const auto blocked = run_attention(qkv, tokens, heads, head_dim, kind, sinks, mask,
                                                   kernels::AttentionPath::KeyBlocks);
                CHECK(l2_relative_error(blocked.out, whole.out) < 1e-6);
                if (kind == AttentionKind::Softmax) CHECK(*std::max_element(blocked.abstention.begin(), blocked.abstention.end()) == 0.0f);
                else CHECK(l2_relative_error(blocked.abstention, whole.abstention) < 1e-6);
            }
    }
}

TEST_CASE("attention picks key blocks by size, and whole rows where the probe reads rows or key mass", "[attention]") {
    using kernels::AttentionPath;
    CHECK_FALSE(kernels::attention_by_key_blocks(257, nullptr));
    CHECK(kernels::attention_by_key_blocks(21320, nullptr));
    float cell = 0;
    kernels::AttentionRecord mass;
    mass.key_mass = &cell;
    CHECK_FALSE(kernels::attention_by_key_blocks(21320, &mass, AttentionPath::KeyBlocks));
    kernels::AttentionRecord abstention;
    abstention.abstention = &cell;
    CHECK(kernels::attention_by_key_blocks(21320, &abstention));
    CHECK(kernels::attention_by_key_blocks(1, nullptr, AttentionPath::KeyBlocks));
}
