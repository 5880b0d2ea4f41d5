// summarize_checkpoint (vitreg info): the Config, tensor shapes and weight memory from the header
// alone, on a file whose data section is cut off (so no tensor byte can have been read).
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <string>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/checkpoint_summary.hpp"
#include "vitreg/error.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

std::uint64_t header_length(const std::string& bytes) {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
    return n;
}

// The weights' bytes as the header states the tensors: f32 all, int8 the rank-2+ *weight
// tensors at one byte plus 8 per output row.
struct Expected {
    std::int64_t parameters = 0, f32 = 0, bf16 = 0, int8 = 0;
};
Expected expected_from(const nlohmann::json& header) {
    Expected e;
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const auto& shape = it.value()["shape"];
        std::int64_t n = 1;
        for (const auto& d : shape) n *= d.get<std::int64_t>();
        const std::string& name = it.key();
        const bool matrix = shape.size() >= 2 && name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
        e.parameters += n;
        e.f32 += 4 * n;
        e.bf16 += matrix ? 2 * n : 4 * n;
        e.int8 += matrix ? n + 8 * shape[0].get<std::int64_t>() : 4 * n;
    }
    return e;
}

}  // namespace

TEST_CASE("summarize_checkpoint reads the header alone: a file without its data is described", "[summary]") {
    const std::string whole = read_bytes(fixture("models/dinov2_f32.safetensors"));
    const std::uint64_t header_len = header_length(whole);
    const auto header = nlohmann::json::parse(whole.substr(8, header_len));
    TempDir dir;
    const std::string cut = dir / "cut.safetensors";
    std::ofstream(cut, std::ios::binary) << whole.substr(0, 8 + header_len);  // no tensor byte at all

    CHECK_THROWS_WITH(Checkpoint(cut), Catch::Contains("outside"));  // loading still refuses it
    const CheckpointSummary s = summarize_checkpoint(cut);
    const CheckpointSummary full = summarize_checkpoint(fixture("models/dinov2_f32.safetensors"));
    const Expected e = expected_from(header);

    CHECK(s.missing_bytes == static_cast<std::int64_t>(whole.size() - 8 - header_len));
    CHECK(full.missing_bytes == 0);
    CHECK(s.config.dim == full.config.dim);
    CHECK(s.config.depth == full.config.depth);
    CHECK(s.config.registers == full.config.registers);
    CHECK(s.parameters() == e.parameters);
    CHECK(s.config.parameters == e.parameters);
    CHECK(s.config.parameters == Checkpoint(fixture("models/dinov2_f32.safetensors")).config().parameters);

    const auto memory = weight_memory(s.tensors);
    REQUIRE(memory.size() == 5);
    CHECK(memory[0].format == "f32");
    CHECK(memory[0].bytes == e.f32);
    CHECK(memory[0].bytes == static_cast<std::int64_t>(whole.size() - 8 - header_len));  // an f32 file's own data
    CHECK(memory[1].format == "bf16");
    CHECK(memory[1].bytes == e.bf16);
    CHECK(memory[2].bytes == e.bf16);  // f16: as wide as bf16
    CHECK(memory[3].format == "int8");
    CHECK(memory[3].bytes == e.int8);
    CHECK(memory[4].format == "int4-g128");  // the key the JSON had when it was an estimate
    CHECK(!memory[4].estimate);  // @int4 holds what it counts (gemm_lowp.hpp's PackedInt4)
    CHECK(memory[4].bytes < memory[3].bytes);

    // A tensor past the end is listed, and reading it says why it cannot be.
    const Checkpoint header_only(cut, {}, CheckpointRead::HeaderOnly);
    CHECK_THROWS_WITH(header_only.file().get("norm.weight").to_float(), Catch::Contains("past the end"));
}
