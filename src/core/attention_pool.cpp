#include "attention_pool.hpp"

#include <cmath>
#include <vector>

#include "vector_loops.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

Eigen::VectorXf vector_of(const std::vector<float>& v) { return Eigen::Map<const Eigen::VectorXf>(v.data(), v.size()); }

RowMatrix matrix_of(const std::vector<float>& v, int rows, int cols) {
    return Eigen::Map<const RowMatrix>(v.data(), rows, cols);
}

}  // namespace

AttentionPool AttentionPool::load(const Checkpoint& ck, const Config& c) {
    AttentionPool p;
    const int D = c.dim;
    p.dim = D;
    p.heads = c.heads;
    p.latent = vector_of(ck.load("attn_pool.latent", {1, 1, D}));
    p.qkv = matrix_of(ck.load("attn_pool.qkv.weight", {3 * D, D}), 3 * D, D);
    p.qkv_bias = vector_of(ck.load("attn_pool.qkv.bias", {3 * D}));
    p.proj = matrix_of(ck.load("attn_pool.proj.weight", {D, D}), D, D);
    p.proj_bias = vector_of(ck.load("attn_pool.proj.bias", {D}));
    p.norm = kernels::Norm{vector_of(ck.load("attn_pool.norm.weight", {D})), vector_of(ck.load("attn_pool.norm.bias", {D}))};
    const auto& fc1 = *ck.parts("attn_pool.mlp.fc1.weight").front();
    if (fc1.shape.size() != 2 || fc1.shape[1] != D || fc1.shape[0] <= 0)
        throw CheckpointError(ck.path() + ": tensor '" + fc1.name + "' has shape " + fc1.shape_string() + ", expected [H, " +
                              std::to_string(D) + "]");
    p.hidden = static_cast<int>(fc1.shape[0]);
    p.fc1 = matrix_of(ck.load("attn_pool.mlp.fc1.weight", {p.hidden, D}), p.hidden, D);
    p.fc1_bias = vector_of(ck.load("attn_pool.mlp.fc1.bias", {p.hidden}));
    p.fc2 = matrix_of(ck.load("attn_pool.mlp.fc2.weight", {D, p.hidden}), D, p.hidden);
    p.fc2_bias = vector_of(ck.load("attn_pool.mlp.fc2.bias", {D}));
    return p;
}

void AttentionPool::pool(const float* tokens, int n, float eps, MlpKind activation, float* out, float* attention) const {
    const int D = dim, hd = dim / heads;
    const Eigen::Map<const RowMatrix> x(tokens, n, D);
    const Eigen::VectorXf q = qkv.topRows(D) * latent + qkv_bias.head(D);
    const auto wk = qkv.middleRows(D, D), wv = qkv.bottomRows(D);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    Eigen::VectorXf mixed(D);
    for (int h = 0; h < heads; ++h) {
        // The probe's scores against every token, q_h · (W_k x + b_k)_h, through W_k^T q_h: one
        // pass over the tokens instead of all their keys.
        const Eigen::VectorXf u = wk.middleRows(h * hd, hd).transpose() * q.segment(h * hd, hd);
        const double offset = q.segment(h * hd, hd).dot(qkv_bias.segment(D + h * hd, hd));
        Eigen::VectorXd s = ((x * u).cast<double>().array() + offset) * scale;
        s = (s.array() - s.maxCoeff()).exp();
        s /= s.sum();
        if (attention)
            for (int t = 0; t < n; ++t) attention[static_cast<std::size_t>(h) * n + t] = static_cast<float>(s[t]);
        // Σ_t p_t (W_v x_t + b_v) = W_v (Σ_t p_t x_t) + b_v, as the probabilities sum to one.
        const Eigen::VectorXf mean = (x.transpose().cast<double>() * s).cast<float>();
        mixed.segment(h * hd, hd) = wv.middleRows(h * hd, hd) * mean + qkv_bias.segment(2 * D + h * hd, hd);
    }
    const Eigen::VectorXf attended = proj * mixed + proj_bias;
    Eigen::VectorXf normed(D);
    kernels::layer_norm(attended.data(), 1, D, norm, eps, normed.data());
    Eigen::VectorXf hidden_act = fc1 * normed + fc1_bias;
    const loops::Table& vec = loops::active();
    switch (activation) {
        case MlpKind::GeluTanh: vec.gelu_tanh(hidden_act.data(), 1, hidden, hidden); break;
        case MlpKind::QuickGelu: vec.quick_gelu(hidden_act.data(), 1, hidden, hidden); break;
        default: vec.gelu(hidden_act.data(), 1, hidden, hidden); break;
    }
    const Eigen::VectorXf result = attended + fc2 * hidden_act + fc2_bias;
    std::copy(result.data(), result.data() + D, out);
}

}  // namespace vitreg
