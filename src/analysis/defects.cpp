#include "vitreg/analysis/defects.hpp"

#include <tbb/parallel_for.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/defect_direction_rows.hpp"
#include "vitreg/error.hpp"
#include "vitreg/tensor_file.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

using Matrix = Eigen::MatrixXd;
using Vector = Eigen::VectorXd;

std::uint64_t splitmix64(std::uint64_t seed, std::uint64_t n) {
    std::uint64_t z = seed + n * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double unit_uniform(std::uint64_t z) { return (static_cast<double>(z >> 11) + 0.5) * 0x1.0p-53; }

Vector load_vector(const Checkpoint& ck, const std::string& name, int n) {
    const auto v = ck.load(name, {n});
    Vector out(n);
    for (int i = 0; i < n; ++i) out[i] = v[static_cast<std::size_t>(i)];
    return out;
}

// A linear's weight [rows, cols] as stored (out × in).
Matrix load_matrix(const Checkpoint& ck, const std::string& name, int rows, int cols) {
    const auto v = ck.load(name, {rows, cols});
    Matrix out(rows, cols);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) out(r, c) = v[static_cast<std::size_t>(r) * cols + c];
    return out;
}

Vector load_bias(const Checkpoint& ck, const std::string& name, int n) {
    return ck.has(name) ? load_vector(ck, name, n) : Vector::Zero(n);
}

// LayerNorm linearized: its centring times its weight, C·diag(w) (docs/design.md, "Artifact metrics").
Matrix centred_norm(const Vector& weight) {
    const auto D = weight.size();
    Matrix c = Matrix::Identity(D, D) - Matrix::Constant(D, D, 1.0 / static_cast<double>(D));
    return weight.asDiagonal() * c;
}

double activate(MlpKind kind, double z) {
    switch (kind) {
        case MlpKind::Gelu: return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
        case MlpKind::QuickGelu: return z / (1.0 + std::exp(-1.702 * z));
        case MlpKind::GeluTanh: return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
        case MlpKind::SwiGlu: return z / (1.0 + std::exp(-z));  // the gate's SiLU
    }
    return z;
}

// The fc2 input of one block for rows x [n, D]: act(x·W₁ᵀ + b₁) (SwiGLU: silu(gate)·value), then
// EVA's sub-LayerNorm where the block has one.
Matrix mlp_hidden(const Config& c, const Matrix& x, const Matrix& w1, const Vector& b1, const Vector* norm_w,
                  const Vector* norm_b) {
    const int H = c.mlp_hidden;
    Matrix pre = x * w1.transpose();
    pre.rowwise() += b1.transpose();
    Matrix h(x.rows(), H);
    for (Eigen::Index r = 0; r < x.rows(); ++r)
        for (int k = 0; k < H; ++k)
            h(r, k) = c.mlp == MlpKind::SwiGlu ? activate(MlpKind::SwiGlu, pre(r, k)) * pre(r, H + k) : activate(c.mlp, pre(r, k));
    if (norm_w) {
        for (Eigen::Index r = 0; r < h.rows(); ++r) {
            const double mean = h.row(r).mean();
            const double var = (h.row(r).array() - mean).square().mean();
            h.row(r) = ((h.row(r).array() - mean) / std::sqrt(var + c.eps)).matrix().cwiseProduct(norm_w->transpose()) +
                       norm_b->transpose();
        }
    }
    return h;
}

// Block i's linearized map E_i = M_i·A_i.
Matrix block_map(const Checkpoint& ck, const Config& c, int i, const Matrix& sample, const Matrix& gram_inverse) {
    const int D = c.dim, H = c.mlp_hidden;
    const std::string b = "blocks." + std::to_string(i) + ".";
    const Vector ones = Vector::Ones(D);
    const Vector g1 = c.layer_scale ? load_vector(ck, b + "ls1.gamma", D) : ones;
    const Vector g2 = c.layer_scale ? load_vector(ck, b + "ls2.gamma", D) : ones;
    const Matrix wv = load_matrix(ck, b + "attn.qkv.weight", 3 * D, D).bottomRows(D);
    const Matrix wo = load_matrix(ck, b + "attn.proj.weight", D, D);
    Matrix value = wv * centred_norm(load_vector(ck, b + "norm1.weight", D));
    if (c.attn_norm) value = centred_norm(load_vector(ck, b + "attn.norm.weight", D)) * value;
    const Matrix A = Matrix::Identity(D, D) + g1.asDiagonal() * (wo * value);

    const bool swiglu = c.mlp == MlpKind::SwiGlu;
    const std::string fc1 = b + (swiglu ? "mlp.w12" : "mlp.fc1"), fc2 = b + (swiglu ? "mlp.w3" : "mlp.fc2");
    const int fc1_rows = swiglu ? 2 * H : H;
    const Matrix w1 = load_matrix(ck, fc1 + ".weight", fc1_rows, D);
    const Vector b1 = load_bias(ck, fc1 + ".bias", fc1_rows);
    const Matrix w2 = load_matrix(ck, fc2 + ".weight", D, H);
    Vector nw, nb;
    if (c.mlp_norm) {
        nw = load_vector(ck, b + "mlp.norm.weight", H);
        nb = load_vector(ck, b + "mlp.norm.bias", H);
    }
    // Xᵀ·Y over the sample in chunks of rows, so that Y never exists whole.
    Matrix xty = Matrix::Zero(D, H);
    constexpr Eigen::Index kChunk = 1024;
    for (Eigen::Index r0 = 0; r0 < sample.rows(); r0 += kChunk) {
        const Eigen::Index n = std::min(kChunk, sample.rows() - r0);
        const Matrix x = sample.middleRows(r0, n);
        xty.noalias() += x.transpose() * mlp_hidden(c, x, w1, b1, c.mlp_norm ? &nw : nullptr, c.mlp_norm ? &nb : nullptr);
    }
    const Matrix B = (gram_inverse * xty).transpose();  // [H, D]: least squares, x·Bᵀ ≈ Y
    const Matrix M = Matrix::Identity(D, D) +
                     g2.asDiagonal() * (w2 * B) * centred_norm(load_vector(ck, b + "norm2.weight", D));
    return M * A;
}

}  // namespace

std::string DefectDirections::fit_description() const {
    return std::to_string(samples) + "-sample least-squares fit, seed " + std::to_string(seed);
}

std::vector<double> defect_sample(int samples, int dim, std::uint64_t seed) {
    const std::size_t n = static_cast<std::size_t>(samples) * dim;
    std::vector<double> out(n);
    for (std::size_t j = 0; j < n; ++j) {
        const std::uint64_t p = j / 2;
        const double u1 = unit_uniform(splitmix64(seed, 2 * p + 1)), u2 = unit_uniform(splitmix64(seed, 2 * p + 2));
        const double r = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * M_PI * u2;
        out[j] = r * (j % 2 ? std::sin(angle) : std::cos(angle));
    }
    return out;
}

DefectDirections defect_directions(const Checkpoint& ck, const DefectOptions& o) {
    if (o.samples < 1) throw UsageError("defects: samples must be at least 1 (got " + std::to_string(o.samples) + ")");
    if (o.top < 1) throw UsageError("defects: top must be at least 1 (got " + std::to_string(o.top) + ")");
    const Config& c = ck.config();
    const int D = c.dim, L = c.depth;
    const auto raw = defect_sample(o.samples, D, o.seed);
    const Matrix sample = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
        raw.data(), o.samples, D);
    // (XᵀX)⁻¹ of the one sample every layer's fit shares; a pseudo-inverse where it is singular
    // (fewer samples than the width).
    const Matrix gram_inverse = (sample.transpose() * sample).completeOrthogonalDecomposition().pseudoInverse();

    std::vector<Matrix> maps(static_cast<std::size_t>(L));
    tbb::parallel_for(0, L, [&](int i) { maps[static_cast<std::size_t>(i)] = block_map(ck, c, i, sample, gram_inverse); });

    DefectDirections d;
    d.layers = L;
    d.dim = D;
    d.top = std::min(o.top, D);
    d.samples = o.samples;
    d.seed = o.seed;
    d.model = ck.path();
    d.directions.resize(static_cast<std::size_t>(L) * D);
    d.singular_values.resize(static_cast<std::size_t>(L) * d.top);
    Matrix product = Matrix::Identity(D, D);
    for (int i = 0; i < L; ++i) {
        product = maps[static_cast<std::size_t>(i)] * product;
        Eigen::BDCSVD<Matrix> svd(product, Eigen::ComputeThinU);
        Vector u = svd.matrixU().col(0);
        Eigen::Index largest = 0;
        u.cwiseAbs().maxCoeff(&largest);
        if (u[largest] < 0) u = -u;
        for (int k = 0; k < D; ++k) d.directions[static_cast<std::size_t>(i) * D + k] = static_cast<float>(u[k]);
        for (int k = 0; k < d.top; ++k)
            d.singular_values[static_cast<std::size_t>(i) * d.top + k] = static_cast<float>(svd.singularValues()[k]);
    }
    return d;
}

DefectDirections defect_directions(const Model& model, const DefectOptions& options) {
    return defect_directions(Checkpoint(model.path()), options);
}

void write_defects(const DefectDirections& d, const std::string& dir) {
    make_dirs(dir);
    const std::map<std::string, std::string> meta = {{"format", "vitreg.defects"},
                                                      {"samples", std::to_string(d.samples)},
                                                      {"seed", std::to_string(d.seed)},
                                                      {"model", d.model}};
    nlohmann::json j = {{"model", d.model},
                        {"definition", "u_i: leading left singular vector of G_i = E_i...E_0, the linearized blocks (SINDER)"},
                        {"fit", d.fit_description()},
                        {"samples", d.samples},
                        {"seed", d.seed},
                        {"layers", nlohmann::json::array()}};
    for (int l = 0; l < d.layers; ++l)
        j["layers"].push_back(
            {{"layer", l},
             {"singular_values", std::vector<float>(d.singular_values.begin() + static_cast<std::ptrdiff_t>(l) * d.top,
                                                    d.singular_values.begin() + static_cast<std::ptrdiff_t>(l + 1) * d.top)},
             {"direction", std::vector<float>(d.direction(l), d.direction(l) + d.dim)}});
    write_safetensors(dir + "/defects.safetensors",
                      {{"directions", ArrayRef{{d.layers, d.dim}, d.directions.data()}},
                       {"singular_values", ArrayRef{{d.layers, d.top}, d.singular_values.data()}}},
                      meta);
    write_file_atomic(dir + "/defects.json", j.dump(1) + "\n");
}

DefectDirections read_defects(const std::string& path) {
    const std::string file = defects_file(path);
    const auto f = open_tensor_file(file, ConfigOverrides{});
    DefectDirectionRows u = defect_direction_rows(*f, file);
    if (!f->has("singular_values"))
        throw Error(file + ": not a defects file (no tensor 'singular_values'; write one with vitreg defects)");
    const TensorView& s = f->get("singular_values");
    if (s.shape.size() != 2 || s.shape[1] < 1 || static_cast<int>(s.shape[0]) != u.layers)
        throw Error(file + ": tensor 'singular_values' has shape " + s.shape_string() + " (expected [" +
                    std::to_string(u.layers) + ", top], a row per layer of 'directions')");
    DefectDirections d;
    d.layers = u.layers;
    d.dim = u.dim;
    d.top = static_cast<int>(s.shape[1]);
    d.directions = std::move(u.rows);
    d.singular_values = s.to_float();
    const auto& meta = f->metadata();
    const auto value = [&](const char* key) { const auto it = meta.find(key); return it == meta.end() ? std::string() : it->second; };
    try {
        d.samples = value("samples").empty() ? 0 : std::stoi(value("samples"));
        d.seed = value("seed").empty() ? 0 : std::stoull(value("seed"));
    } catch (const std::exception&) {
        throw Error(file + ": metadata samples / seed are not numbers");
    }
    d.model = value("model");
    return d;
}

void check_defects_fit(const DefectDirections& d, int layers, int dim, const std::string& what) {
    if (d.layers != layers || d.dim != dim)
        throw UsageError(what + ": the defect directions are for " + std::to_string(d.layers) + " layers of width " +
                         std::to_string(d.dim) + ", the model has " + std::to_string(layers) + " of width " + std::to_string(dim));
}

}  // namespace vitreg
