// Output formats: .npy headers as numpy writes them, safetensors that our reader (and any
// other) reads back, atomic replacement.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cstring>

#include "test_support.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/writers.hpp"

using namespace vitreg;
using namespace vitreg::test;

TEST_CASE("npy: version 1.0 header, 64-byte aligned, little-endian float32") {
    const std::vector<float> v{1, 2, 3, 4, 5, 6};
    const std::string b = npy_bytes(ArrayRef{{2, 3}, v.data()});
    CHECK(b.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    const std::size_t header_len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
    CHECK((10 + header_len) % 64 == 0);
    const std::string header = b.substr(10, header_len);
    CHECK_THAT(header, Catch::StartsWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
    CHECK(header.back() == '\n');
    CHECK(b.size() == 10 + header_len + 24);
    float last;
    std::memcpy(&last, b.data() + b.size() - 4, 4);
    CHECK(last == 6.0f);
    CHECK_THAT(npy_bytes(ArrayRef{{5}, v.data()}), Catch::Contains("'shape': (5,)"));
    CHECK_THAT(npy_bytes(ArrayRef{{0, 3}, v.data()}), Catch::Contains("'shape': (0, 3)"));
}

TEST_CASE("safetensors written and read back") {
    TempDir dir;
    const std::vector<float> a{1.5f, -2, 3}, b{7, 8, 9, 10};
    write_safetensors(dir / "t.safetensors", {{"a", {{3}, a.data()}}, {"b", {{2, 2}, b.data()}}}, {{"k", "v"}});
    const SafetensorsFile f(dir / "t.safetensors");
    CHECK(f.names() == std::vector<std::string>{"a", "b"});
    CHECK(f.get("a").to_float() == a);
    CHECK(f.get("b").shape == std::vector<std::int64_t>{2, 2});
    CHECK(f.get("b").to_float() == b);
    CHECK(f.metadata().at("k") == "v");
}

TEST_CASE("safetensors streamed in a given order read back by name; a name twice is refused") {
    TempDir dir;
    const std::vector<float> z{4, 5}, a{1, 2, 3};
    const std::vector<std::pair<std::string, ArrayRef>> order{{"z", {{2}, z.data(), DType::BF16}}, {"a", {{3}, a.data()}}};
    AtomicFile file(dir / "s.safetensors");
    file.write(safetensors_header_in_order(order));
    for (const auto& [name, array] : order) file.write(array_bytes(array));
    file.commit();
    const SafetensorsFile f(dir / "s.safetensors");
    CHECK(f.get("z").data < f.get("a").data);  // (the data sections lie in the order given, not by name)
    CHECK(f.get("z").to_float() == z);
    CHECK(f.get("a").to_float() == a);
    CHECK_THROWS_WITH(safetensors_header_in_order({order[1], order[1]}), Catch::Contains("tensor 'a' twice"));
}

TEST_CASE("half and bfloat16 widen exactly") {
    CHECK(half_to_float(0x3c00) == 1.0f);
    CHECK(half_to_float(0xc000) == -2.0f);
    CHECK(half_to_float(0x0001) == Approx(5.960464477539063e-08f));  // smallest subnormal
    CHECK(half_to_float(0x7bff) == 65504.0f);
    CHECK(std::isinf(half_to_float(0x7c00)));
    CHECK(bf16_to_float(0x3f80) == 1.0f);
    CHECK(bf16_to_float(0xc0a0) == -5.0f);
}

TEST_CASE("atomic writes replace whole files and leave no temporaries") {
    TempDir dir;
    write_file_atomic(dir / "f.txt", "first");
    write_file_atomic(dir / "f.txt", "second");
    CHECK(read_bytes(dir / "f.txt") == "second");
    CHECK(std::system(("test $(ls '" + dir.path() + "' | wc -l) -eq 1").c_str()) == 0);
    CHECK_THROWS_AS(write_file_atomic(dir / "no/such/dir/f.txt", "x"), IoError);
    make_dirs(dir / "a/b/c");
    struct stat st {};
    CHECK(::stat((dir / "a/b/c").c_str(), &st) == 0);
}

TEST_CASE("direct (O_DIRECT) atomic files hold every byte of unaligned pieces, past the staging buffer") {
    TempDir dir;
    std::string want;
    for (const std::size_t size : {std::size_t(5), (std::size_t(9) << 20) + 123, std::size_t(4096), std::size_t(7) << 20}) {
        std::string piece(size, '\0');
        for (std::size_t i = 0; i < size; ++i) piece[i] = static_cast<char>((i * 131 + want.size()) % 251);
        want += piece;
    }
    {
        AtomicFile f(dir / "big.bin", true);
        std::size_t at = 0;
        for (const std::size_t size : {std::size_t(5), (std::size_t(9) << 20) + 123, std::size_t(4096), std::size_t(7) << 20}) {
            f.write(want.data() + at, size);
            at += size;
        }
        f.commit();
    }
    CHECK(read_bytes(dir / "big.bin") == want);
    {
        AtomicFile f(dir / "dropped.bin", true);  // never committed: nothing left behind
        f.write(want.data(), 100);
    }
    CHECK(std::system(("test $(ls '" + dir.path() + "' | wc -l) -eq 1").c_str()) == 0);
}

TEST_CASE("inputs: folders walk sorted and recursive, lists keep their order") {
    TempDir dir;
    make_dirs(dir / "imgs/sub");
    make_dirs(dir / "imgs/folder.jpg");
    for (const char* f : {"imgs/b.png", "imgs/a.JPG", "imgs/sub/c.bmp", "imgs/notes.txt"}) write_bytes(dir / f, "x");
    const auto walked = expand_inputs({dir / "imgs"});
    CHECK(walked == std::vector<std::string>{dir / "imgs/a.JPG", dir / "imgs/b.png", dir / "imgs/folder.jpg",
                                             dir / "imgs/sub/c.bmp"});
    write_bytes(dir / "list.txt", "# a comment\nz.png\n\n  y.jpg  \r\n");
    CHECK(expand_inputs({"@" + (dir / "list.txt"), "x.png"}) == std::vector<std::string>{"z.png", "y.jpg", "x.png"});
    CHECK_THROWS_AS(expand_inputs({"@" + (dir / "missing.txt")}), UsageError);
}
