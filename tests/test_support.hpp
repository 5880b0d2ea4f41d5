#pragma once
// Helpers shared by the tests: fixture paths, fixture tensors, comparisons, temp folders.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "core/safetensors.hpp"

namespace vitreg::test {

inline std::string fixture(const std::string& rel) { return std::string(VITREG_FIXTURES_DIR) + "/" + rel; }

inline nlohmann::json fixture_json(const std::string& rel) {
    std::ifstream in(fixture(rel));
    return nlohmann::json::parse(in);
}

inline std::vector<float> tensor(const SafetensorsFile& f, const std::string& name) { return f.get(name).to_float(); }

// Parity with PyTorch (the upstream code, tests/reference), relative to the output's scale:
// the bound; today's errors are near 1e-6.
constexpr double kParityTolerance = 1e-4;

// max |a - b| / max |b|: the error relative to the output's scale.
inline double relative_error(const float* a, const std::vector<float>& b) {
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
    }
    return err / std::max(scale, 1e-12);
}
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() ? relative_error(a.data(), b) : INFINITY;
}

inline bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

// A fresh folder under the build's temp area, removed at scope exit.
class TempDir {
public:
    TempDir() {
        std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : "/tmp") + "/vitreg-test-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        path_ = ::mkdtemp(buf.data());
    }
    ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// A torch hub cache of its own: TORCH_HOME points at a fresh folder for this object's life (the
// old value restored after), and checkpoints() is its hub/checkpoints.
class TorchHome {
public:
    TorchHome() : saved_(std::getenv("TORCH_HOME") ? std::getenv("TORCH_HOME") : ""), had_(std::getenv("TORCH_HOME")) {
        std::system(("mkdir -p '" + checkpoints() + "'").c_str());
        ::setenv("TORCH_HOME", home_.path().c_str(), 1);
    }
    ~TorchHome() {
        if (had_) ::setenv("TORCH_HOME", saved_.c_str(), 1);
        else ::unsetenv("TORCH_HOME");
    }
    std::string checkpoints() const { return home_ / "hub/checkpoints"; }

private:
    TempDir home_;
    std::string saved_;
    bool had_;
};

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A deterministic, smooth input [1, 3, h, w] for forwards whose outputs are compared.
inline std::vector<float> smooth_pixels(int h, int w) {
    std::vector<float> x(static_cast<std::size_t>(3) * h * w);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i % 97)) + 0.1f * static_cast<float>(i % 5);
    return x;
}

// Reads back a float32 .npy written by write_npy (header length from bytes 8-9).
inline std::vector<float> npy_data(const std::string& path) {
    const std::string b = read_bytes(path);
    const std::size_t start = 10 + (static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8));
    std::vector<float> v((b.size() - start) / 4);
    if (!v.empty()) std::memcpy(v.data(), b.data() + start, v.size() * 4);  // an empty vector's data() may be null
    return v;
}
inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace vitreg::test
