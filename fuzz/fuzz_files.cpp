#include "fuzz_files.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "io/zip_reader.hpp"  // crc32

namespace vitreg::fuzz {

namespace fs = std::filesystem;

const std::string& scratch() {
    // Never destroyed, so that the exit hook, which runs after static destructors, can still read it.
    static const std::string* const dir = [] {
        std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        std::string templ = base + "/vitreg-fuzz-XXXXXX";
        if (!::mkdtemp(templ.data())) throw std::runtime_error("cannot make a scratch folder in " + base);
        std::atexit([] {  // each test process and fuzz run would otherwise leave one behind
            std::error_code ec;
            fs::remove_all(*dir, ec);
        });
        return new std::string(templ);
    }();
    return *dir;
}

void put(const std::string& path, const std::uint8_t* data, std::size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<std::uint8_t> seed(const std::string& relative) {
    std::ifstream in(std::string(VITREG_FUZZ_SEEDS_DIR) + "/" + relative, std::ios::binary);
    if (!in) throw std::runtime_error("missing seed " + relative);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string zip_archive(const std::vector<std::pair<std::string, std::string>>& entries) {
    std::string out, central;
    const auto le = [](std::string& s, std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
    };
    for (const auto& entry : entries) {
        const std::string& name = entry.first;
        const std::string& data = entry.second;
        const auto crc = vitreg::crc32(reinterpret_cast<const unsigned char*>(data.data()), data.size());
        const std::size_t offset = out.size();
        le(out, 0x04034b50, 4), le(out, 20, 2), le(out, 0, 2), le(out, 0, 2), le(out, 0, 4);
        le(out, crc, 4), le(out, data.size(), 4), le(out, data.size(), 4), le(out, name.size(), 2), le(out, 0, 2);
        out += name + data;
        le(central, 0x02014b50, 4), le(central, 20, 2), le(central, 20, 2), le(central, 0, 2), le(central, 0, 2);
        le(central, 0, 4), le(central, crc, 4), le(central, data.size(), 4), le(central, data.size(), 4);
        le(central, name.size(), 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2);
        le(central, 0, 4), le(central, offset, 4);
        central += name;
    }
    const std::size_t cd_offset = out.size();
    out += central;
    le(out, 0x06054b50, 4), le(out, 0, 2), le(out, 0, 2), le(out, entries.size(), 2), le(out, entries.size(), 2);
    le(out, central.size(), 4), le(out, cd_offset, 4), le(out, 0, 2);
    return out;
}

namespace {

constexpr std::size_t kMaxTreeLines = 32, kMaxTreeDepth = 3;

// `line` as a path under `root`, or empty when make_tree skips it.
fs::path tree_path(const fs::path& root, const std::string& line) {
    fs::path out = root;
    std::size_t parts = 0, start = 0;
    const std::size_t end = !line.empty() && line.back() == '/' ? line.size() - 1 : line.size();
    while (start <= end) {
        const std::size_t slash = std::min(line.find('/', start), end);
        const std::string part = line.substr(start, slash - start);
        if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string::npos || ++parts > kMaxTreeDepth)
            return {};
        out /= part;
        start = slash + 1;
    }
    return out;
}

}  // namespace

void make_tree(const std::string& root, const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::size_t blank = text.find("\n\n");
    const std::string listing = text.substr(0, blank);
    std::vector<std::string> pieces;
    if (blank != std::string::npos) {
        const std::string contents = text.substr(blank + 2);
        std::size_t start = 0;
        for (std::size_t cut = contents.find("\n--\n"); cut != std::string::npos; cut = contents.find("\n--\n", start)) {
            pieces.push_back(contents.substr(start, cut - start));
            start = cut + 4;
        }
        pieces.push_back(contents.substr(start));
    }
    std::error_code ec;
    fs::remove_all(root, ec);
    fs::create_directories(root, ec);
    std::size_t lines = 0, files = 0;
    for (std::size_t start = 0; start < listing.size() && lines < kMaxTreeLines; ++lines) {
        const std::size_t newline = std::min(listing.find('\n', start), listing.size());
        const std::string line = listing.substr(start, newline - start);
        start = newline + 1;
        const fs::path path = tree_path(root, line);
        if (path.empty()) continue;
        if (line.back() == '/') {
            fs::create_directories(path, ec);
            continue;
        }
        if (!fs::create_directories(path.parent_path(), ec) && ec) continue;
        std::ofstream out(path, std::ios::binary | std::ios::trunc);  // a name the file system refuses is skipped
        if (files < pieces.size()) out << pieces[files];
        ++files;
    }
}

InFolder::InFolder(const std::string& dir) {
    char* here = ::getcwd(nullptr, 0);
    if (!here) throw std::runtime_error("cannot read the working folder");
    previous_ = here;
    ::free(here);
    if (::chdir(dir.c_str()) != 0) throw std::runtime_error("cannot enter " + dir);
}

InFolder::~InFolder() {
    if (::chdir(previous_.c_str()) != 0) std::abort();  // later inputs would land elsewhere
}

}  // namespace vitreg::fuzz
