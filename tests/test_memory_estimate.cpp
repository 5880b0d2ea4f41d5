// The memory estimate before loading: a model whose weights and one native-size image do not fit
// --max-memory is refused by open_model before any weight is read, naming the model, its
// estimate at each precision and the precision that fits.
#include <catch2/catch.hpp>

#include <string>

#include "vitreg/checkpoint.hpp"
#include "vitreg/forward_memory.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/error.hpp"

using namespace vitreg;

namespace {

const std::string kShipped = "vitreg-untrained-s14-d192-reg4";

// One native-size image of the shipped model at `p`, as open_model estimates it.
ForwardMemory native(const Config& c, Precision p) {
    return forward_memory(c, p, c.prefix_tokens() + c.registers + std::int64_t(c.grid) * c.grid, c.native_size(),
                          c.native_size(), 2);
}

}  // namespace

TEST_CASE("the estimate's weights are the packed matrices at the precision, plus the fp32 vectors", "[memory]") {
    const Config c = Checkpoint(resolve_model_path(kShipped)).config();
    const std::int64_t D = c.dim, H = c.mlp_hidden, p = c.patch;
    const std::int64_t matrices = c.depth * (4 * D * D + 2 * D * H) + 3 * p * p * D, vectors = c.depth * 8 * D * 4;
    CHECK(native(c, Precision::Fp32).weights == 4 * matrices + vectors);
    CHECK(native(c, Precision::Int8).weights == matrices + vectors);
    // int4: half a byte a weight, and a bf16 scale and zero and a 16-bit sum per 128 (PackedInt4)
    CHECK(native(c, Precision::Int4).weights == matrices / 2 + (matrices + 127) / 128 * 6 + vectors);
    CHECK(native(c, Precision::Fp32).margin == kMemoryMargin);
    CHECK(native(c, Precision::Fp32).total() ==
          native(c, Precision::Fp32).weights + native(c, Precision::Fp32).activations + native(c, Precision::Fp32).attention +
              kMemoryMargin);
}

TEST_CASE("a model that cannot fit --max-memory is refused before loading, with the precision that fits", "[memory]") {
    const Config c = Checkpoint(resolve_model_path(kShipped)).config();
    const std::int64_t bf16 = native(c, Precision::Bf16).total(), int8 = native(c, Precision::Int8).total();
    REQUIRE(int8 < bf16);
    ModelRequest r;
    r.model = kShipped;
    r.threads = 2;
    r.max_memory = (bf16 + int8) / 2;  // int8 fits; bf16 and fp32 do not
    CHECK_THROWS_AS(open_model(r), UsageError);
    CHECK_THROWS_WITH(open_model(r), Catch::Contains(kShipped + ": one 224x224 image at fp32 needs about") &&
                                         Catch::Contains("over the memory cap") && Catch::Contains("nothing was loaded") &&
                                         Catch::Contains("fp32 ") && Catch::Contains("int8 ") &&
                                         Catch::Contains(kShipped + "@int8 would fit"));
    r.max_memory = std::int64_t(1) << 20;
    CHECK_THROWS_WITH(open_model(r), Catch::Contains("none fits this cap"));
    // At int8 the same cap holds it: it loads and runs.
    r.max_memory = (bf16 + int8) / 2;
    r.precision.precision = Precision::Int8;
    CHECK(open_model(r).config().dim == c.dim);
}
