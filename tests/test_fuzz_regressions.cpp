// Replays the fuzzers' seeds and every input a fuzzer ever flagged (fuzz/regressions/<target>/)
// through the same code the fuzzers run; in the sanitizer build this is where a past finding
// would show up again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "targets.hpp"

namespace fs = std::filesystem;

TEST_CASE("fuzz seeds and past findings are handled", "[fuzz]") {
    const fs::path root = VITREG_FUZZ_DIR;
    std::size_t replayed = 0;
    for (const char* target : {"safetensors", "torch", "config", "image", "list"}) {
        for (const char* set : {"seeds", "regressions"}) {
            const fs::path dir = root / set / target;
            if (!fs::is_directory(dir)) continue;
            for (const auto& entry : fs::directory_iterator(dir)) {
                std::ifstream in(entry.path(), std::ios::binary);
                const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
                INFO(entry.path().string());
                CHECK_NOTHROW(vitreg::fuzz::run_target(target, bytes.data(), bytes.size()));
                ++replayed;
            }
        }
    }
    CHECK(replayed >= 20);
}
